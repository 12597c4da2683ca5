#include "runtime/plan_control_run.h"

#include <limits>

#include "ir/error.h"

namespace kiln::plan {

namespace {

// A tensor at a device address with its type: an operand or result of the
// node, or one batch element of it (Scan-8).
struct View {
  uint64_t at = 0;
  TensorType type;
};

// Sizes around `axis` of a row-major shape: elements before it, its length,
// bytes of everything after it.
struct AxisSplit {
  int64_t outer = 1, len = 1;
  uint64_t inner_bytes = 0;
};
AxisSplit split_at(const TensorType& t, int64_t axis) {
  AxisSplit s;
  int64_t inner = 1;
  for (int64_t d = 0; d < t.rank(); ++d) {
    if (d < axis) s.outer *= t.shape[size_t(d)];
    else if (d == axis) s.len = t.shape[size_t(d)];
    else inner *= t.shape[size_t(d)];
  }
  s.inner_bytes = uint64_t(inner) * dtype_size(t.dtype);
  return s;
}

// Element `index` of `v` along `axis` to or from a contiguous buffer: one
// copy per row before the axis (a single copy when the axis is the first).
void copy_slice(ControlDevice& dev, const View& v, int64_t axis, int64_t index, uint64_t slice, bool into_slice) {
  AxisSplit s = split_at(v.type, axis);
  if (!s.inner_bytes) return;
  for (int64_t o = 0; o < s.outer; ++o) {
    uint64_t tensor_at = v.at + uint64_t(o * s.len + index) * s.inner_bytes,
             slice_at = slice + uint64_t(o) * s.inner_bytes;
    if (into_slice) dev.copy(slice_at, tensor_at, s.inner_bytes);
    else dev.copy(tensor_at, slice_at, s.inner_bytes);
  }
}

void copy_bytes(ControlDevice& dev, uint64_t dst, uint64_t src, uint64_t n) {
  if (n && dst != src) dev.copy(dst, src, n);
}

std::string node_name(const ControlFlow& c, std::string_view what) {
  static const char* kinds[] = {"if", "loop", "scan"};
  return fmt::format("{}: node #{} ({})", what, c.node, kinds[static_cast<int>(c.kind)]);
}

int64_t read_int(ControlDevice& dev, const ControlFlow& c, size_t operand) {
  const TensorType& t = c.operand_types[operand];
  uint64_t at = dev.address(c.operands[operand]);
  if (t.dtype == DType::Bool || t.dtype == DType::U8) {
    uint8_t v = 0;
    dev.read(&v, at, 1);
    return v;
  }
  if (t.dtype == DType::I32) {
    int32_t v = 0;
    dev.read(&v, at, 4);
    return v;
  }
  if (t.dtype == DType::I64) {
    int64_t v = 0;
    dev.read(&v, at, 8);
    return v;
  }
  fail("{}: operand {} is {}, expected bool or an integer", node_name(c, "plan"), operand, t.str());
}

void run_if(const ControlFlow& c, ControlDevice& dev) {
  // The branches read the node's operands and write its results in place
  // (the plan builder bound them there), so nothing is copied.
  bool cond = read_int(dev, c, 0) != 0;
  dev.run_steps(c.regions[cond ? 0 : 1].steps);
}

void run_loop(const ControlFlow& c, ControlDevice& dev, std::string_view what) {
  const RegionPlan& body = c.regions[0];
  const size_t carried = c.carried, scans = c.results.size() - carried;
  int64_t trips = c.present[0] ? read_int(dev, c, 0) : std::numeric_limits<int64_t>::max();
  bool cond = c.present[1] ? read_int(dev, c, 1) != 0 : true;
  for (size_t j = 0; j < carried; ++j)
    copy_bytes(dev, dev.address(body.params[2 + j]), dev.address(c.operands[2 + j]), c.operands[2 + j].nbytes);
  // The body's condition parameter is true whenever the body runs (ONNX Loop).
  const uint8_t yes = 1;
  dev.write(dev.address(body.params[1]), &yes, 1);
  // Scan outputs: the trip count is static (ir/control_flow.h).
  const int64_t stacked = scans ? c.result_types[carried].shape[0] : -1;
  int64_t i = 0;
  for (; i < trips && cond; ++i) {
    if (scans && i >= stacked)
      fail("{}: the loop runs more than {} iterations but its scan outputs were compiled for {}", node_name(c, what),
           stacked, stacked);
    dev.write(dev.address(body.params[0]), &i, 8);
    dev.run_steps(body.steps);
    // A `for` loop (the body returns its condition parameter or a constant
    // true) needs no read, so no wait for the stream, per iteration.
    if (!c.cond_always_true) {
      uint8_t go = 0;
      dev.read(&go, dev.address(body.returns[0]), 1);
      cond = go != 0;
    }
    for (size_t j = 0; j < carried; ++j)
      copy_bytes(dev, dev.address(body.params[2 + j]), dev.address(body.returns[1 + j]), body.returns[1 + j].nbytes);
    for (size_t k = 0; k < scans; ++k) {
      const BufferRef& elem = body.returns[1 + carried + k];
      copy_bytes(dev, dev.address(c.results[carried + k]) + uint64_t(i) * elem.nbytes, dev.address(elem), elem.nbytes);
    }
  }
  if (scans && i != stacked)
    fail("{}: the loop ran {} iterations but its scan outputs were compiled for {}", node_name(c, what), i, stacked);
  for (size_t j = 0; j < carried; ++j)
    copy_bytes(dev, dev.address(c.results[j]), dev.address(body.params[2 + j]), c.results[j].nbytes);
}

// One (unbatched) scan over views of the states, scan inputs and results.
void scan_once(const ControlFlow& c, ControlDevice& dev, const std::vector<View>& ops, const std::vector<View>& res) {
  const RegionPlan& body = c.regions[0];
  const size_t n = c.carried, m = c.scan_inputs, k = c.results.size() - n;
  for (size_t i = 0; i < n; ++i) copy_bytes(dev, dev.address(body.params[i]), ops[i].at, ops[i].type.nbytes());
  const int64_t len = ops[n].type.shape[size_t(c.input_axes[0])];
  for (int64_t t = 0; t < len; ++t) {
    for (size_t j = 0; j < m; ++j)
      copy_slice(dev, ops[n + j], c.input_axes[j], c.input_reverse[j] ? len - 1 - t : t,
                 dev.address(body.params[n + j]), true);
    dev.run_steps(body.steps);
    for (size_t i = 0; i < n; ++i)
      copy_bytes(dev, dev.address(body.params[i]), dev.address(body.returns[i]), body.returns[i].nbytes);
    for (size_t o = 0; o < k; ++o)
      copy_slice(dev, res[n + o], c.output_axes[o], c.output_reverse[o] ? len - 1 - t : t,
                 dev.address(body.returns[n + o]), false);
  }
  for (size_t i = 0; i < n; ++i) copy_bytes(dev, res[i].at, dev.address(body.params[i]), res[i].type.nbytes());
}

void run_scan(const ControlFlow& c, ControlDevice& dev) {
  const size_t n = c.carried, m = c.scan_inputs;
  std::vector<View> ops, res;
  for (size_t i = 0; i < n + m; ++i) ops.push_back({dev.address(c.operands[i]), c.operand_types[i]});
  for (size_t i = 0; i < c.results.size(); ++i) res.push_back({dev.address(c.results[i]), c.result_types[i]});
  if (!c.batched) return scan_once(c, dev, ops, res);
  // Scan-8: the body runs per batch element, on that element of every
  // operand and result (captures are bound whole by the plan builder).
  auto element = [](const View& v, int64_t b) {
    TensorType t(v.type.dtype, Shape(v.type.shape.begin() + 1, v.type.shape.end()));
    return View{v.at + uint64_t(b) * t.nbytes(), t};
  };
  const int64_t batch = c.operand_types[n].shape[0];
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<View> ob, rb;
    for (const View& v : ops) ob.push_back(element(v, b));
    for (const View& v : res) rb.push_back(element(v, b));
    scan_once(c, dev, ob, rb);
  }
}

}  // namespace

void run_control(const Plan& p, const ControlFlow& c, ControlDevice& dev, std::string_view what) {
  (void)p;
  switch (c.kind) {
    case ControlKind::If:
      return run_if(c, dev);
    case ControlKind::Loop:
      return run_loop(c, dev, what);
    case ControlKind::Scan:
      return run_scan(c, dev);
  }
}

}  // namespace kiln::plan
