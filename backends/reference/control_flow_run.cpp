#include "backends/reference/control_flow_run.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "ir/control_flow.h"
#include "ir/error.h"

namespace kiln {

namespace {

// Sizes around `axis` of a row-major shape: elements before it (outer),
// its length, and bytes of everything after it (inner).
struct AxisSplit {
  int64_t outer = 1, len = 1;
  size_t inner_bytes = 0;
};
AxisSplit split_at(const TensorType& t, int64_t axis) {
  AxisSplit s;
  int64_t inner = 1;
  for (int64_t d = 0; d < t.rank(); ++d) {
    if (d < axis) s.outer *= t.shape[d];
    else if (d == axis) s.len = t.shape[d];
    else inner *= t.shape[d];
  }
  s.inner_bytes = static_cast<size_t>(inner) * dtype_size(t.dtype);
  return s;
}

// Element `index` of `t` along `axis` (that dim dropped).
Tensor slice_at(const Tensor& t, int64_t axis, int64_t index) {
  Shape shape = t.shape();
  shape.erase(shape.begin() + axis);
  Tensor out(t.dtype(), shape);
  AxisSplit s = split_at(t.type(), axis);
  if (s.inner_bytes == 0) return out;
  auto* dst = static_cast<uint8_t*>(out.raw());
  const auto* src = static_cast<const uint8_t*>(t.raw());
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(dst + o * s.inner_bytes, src + (o * s.len + index) * s.inner_bytes, s.inner_bytes);
  return out;
}

// The elements stacked on a new dim at `axis`, into a tensor of type `want`
// (which the caller checked has elems.size() there).
Tensor stack_at(const std::vector<Tensor>& elems, int64_t axis, const TensorType& want) {
  Tensor out(TensorType(want.dtype, want.shape));
  AxisSplit s = split_at(want, axis);  // len = elems.size()
  if (s.inner_bytes == 0) return out;
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t t = 0; t < s.len; ++t) {
    const auto* src = static_cast<const uint8_t*>(elems[t].raw());
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(dst + (o * s.len + t) * s.inner_bytes, src + o * s.inner_bytes, s.inner_bytes);
  }
  return out;
}

std::vector<Tensor> run_if(const std::vector<const Tensor*>& ops, const RegionRunner& run) {
  bool cond = ops.at(0)->get_int(0) != 0;
  std::vector<const Tensor*> ins(ops.begin() + 1, ops.end());
  return run(cond ? 0 : 1, ins);
}

std::vector<Tensor> run_loop(const Node& n, const std::vector<const Tensor*>& ops, const RegionRunner& run) {
  LoopSignature sig = loop_signature(n);
  int64_t trips = ops.at(0) ? ops[0]->get_int(0) : std::numeric_limits<int64_t>::max();
  bool cond = ops.size() > 1 && ops[1] ? ops[1]->get_int(0) != 0 : true;
  std::vector<Tensor> carried;
  for (int i = 0; i < sig.carried; ++i) carried.push_back(*ops.at(2 + i));
  std::vector<std::vector<Tensor>> scans(sig.scans);
  for (int64_t i = 0; i < trips && cond; ++i) {
    Tensor iter = Tensor::scalar(DType::I64, 0), c = Tensor::scalar(DType::Bool, 1);
    iter.set_int(0, i);
    std::vector<const Tensor*> ins{&iter, &c};
    for (const Tensor& t : carried) ins.push_back(&t);
    for (size_t k = 2 + sig.carried; k < ops.size(); ++k) ins.push_back(ops[k]);
    std::vector<Tensor> outs = run(0, ins);
    cond = outs.at(0).get_int(0) != 0;
    for (int j = 0; j < sig.carried; ++j) carried[j] = std::move(outs[1 + j]);
    for (int k = 0; k < sig.scans; ++k) scans[k].push_back(std::move(outs[1 + sig.carried + k]));
  }
  std::vector<Tensor> results = std::move(carried);
  for (int k = 0; k < sig.scans; ++k) {
    const TensorType& want = n.output(sig.carried + k)->type();
    if (int64_t(scans[k].size()) != want.shape[0])
      fail("{}: the loop ran {} iterations but its scan outputs were compiled for {}", n.describe(), scans[k].size(),
           want.shape[0]);
    results.push_back(stack_at(scans[k], 0, want));
  }
  return results;
}

// One (unbatched) scan: states, scan inputs and captures as the body sees them.
std::vector<Tensor> scan_once(const ScanSignature& sig, const std::vector<const Tensor*>& ops,
                              const std::vector<TensorType>& out_types, const RegionRunner& run) {
  std::vector<Tensor> states;
  for (int i = 0; i < sig.carried; ++i) states.push_back(*ops[i]);
  const Tensor& x0 = *ops[sig.carried];
  int64_t len = x0.shape()[sig.input_axes[0]];
  std::vector<std::vector<Tensor>> elems(sig.scan_outputs);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Tensor> slices;
    for (int j = 0; j < sig.scan_inputs; ++j)
      slices.push_back(slice_at(*ops[sig.carried + j], sig.input_axes[j], sig.input_reverse[j] ? len - 1 - t : t));
    std::vector<const Tensor*> ins;
    for (const Tensor& s : states) ins.push_back(&s);
    for (const Tensor& s : slices) ins.push_back(&s);
    for (size_t k = sig.carried + sig.scan_inputs; k < ops.size(); ++k) ins.push_back(ops[k]);
    std::vector<Tensor> outs = run(0, ins);
    for (int i = 0; i < sig.carried; ++i) states[i] = std::move(outs[i]);
    for (int k = 0; k < sig.scan_outputs; ++k) elems[k].push_back(std::move(outs[sig.carried + k]));
  }
  std::vector<Tensor> results = std::move(states);
  for (int k = 0; k < sig.scan_outputs; ++k) {
    if (sig.output_reverse[k]) std::reverse(elems[k].begin(), elems[k].end());
    results.push_back(stack_at(elems[k], sig.output_axes[k], out_types[sig.carried + k]));
  }
  return results;
}

std::vector<Tensor> run_scan(const Node& n, const std::vector<const Tensor*>& ops, const RegionRunner& run) {
  ScanSignature sig = scan_signature(n);
  std::vector<TensorType> types;
  for (Value* o : n.outputs()) types.push_back(o->type());
  if (!sig.batched) return scan_once(sig, ops, types, run);
  // Scan-8: the body runs once per batch element, on that element of every
  // operand but the captures.
  int64_t batch = ops.at(sig.carried)->shape()[0];
  std::vector<TensorType> elem_types;
  for (const TensorType& t : types)
    elem_types.push_back(TensorType(t.dtype, Shape(t.shape.begin() + 1, t.shape.end())));
  std::vector<std::vector<Tensor>> per_batch(types.size());
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> parts;
    for (int i = 0; i < sig.carried + sig.scan_inputs; ++i) parts.push_back(slice_at(*ops[i], 0, b));
    std::vector<const Tensor*> ins;
    for (const Tensor& p : parts) ins.push_back(&p);
    for (size_t k = sig.carried + sig.scan_inputs; k < ops.size(); ++k) ins.push_back(ops[k]);
    std::vector<Tensor> outs = scan_once(sig, ins, elem_types, run);
    for (size_t r = 0; r < outs.size(); ++r) per_batch[r].push_back(std::move(outs[r]));
  }
  std::vector<Tensor> results;
  for (size_t r = 0; r < types.size(); ++r) results.push_back(stack_at(per_batch[r], 0, types[r]));
  return results;
}

}  // namespace

std::vector<Tensor> run_control_flow(const Node& n, const std::vector<const Tensor*>& operands,
                                     const RegionRunner& run_region) {
  std::vector<Tensor> outs;
  if (n.op() == "if") outs = run_if(operands, run_region);
  else if (n.op() == "loop") outs = run_loop(n, operands, run_region);
  else if (n.op() == "scan") outs = run_scan(n, operands, run_region);
  else fail("{} is not a control-flow node", n.describe());
  KILN_CHECK(int(outs.size()) == n.num_outputs(), "{} gave {} results", n.describe(), outs.size());
  for (int i = 0; i < n.num_outputs(); ++i)
    if (outs[i].dtype() != n.output(i)->dtype() || outs[i].shape() != n.output(i)->shape())
      fail("{}: result {} is {} at run time but was compiled as {}", n.describe(), i, outs[i].type().str(),
           n.output(i)->type().str());
  return outs;
}

}  // namespace kiln
