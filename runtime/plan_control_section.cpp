// Section `control` of a plan (docs/plan_format.md): one record per
// if/loop/scan node, with its regions' launch lists, and the checks that make
// the host-driven run (runtime/plan_control_run.h) stay inside every buffer:
// the executor slices scan inputs and stacks loop and scan outputs by the
// types recorded here, so the types must agree with the bindings' sizes.
#include <algorithm>

#include "runtime/plan_sections.h"

namespace kiln::plan::detail {

namespace {

void put_ref(Writer& w, const BufferRef& b) {
  w.put<uint8_t>(static_cast<uint8_t>(b.kind));
  w.put<uint32_t>(b.index);
  w.put<uint64_t>(b.offset);
  w.put<uint64_t>(b.nbytes);
  w.put<int64_t>(b.elements);
}

BufferRef get_ref(Reader& r) {
  BufferRef b;
  uint8_t kind = r.get<uint8_t>("buffer kind");
  if (kind > static_cast<uint8_t>(BufferKind::Weight)) fail("{}: unknown buffer kind {}", r.what(), kind);
  b.kind = static_cast<BufferKind>(kind);
  b.index = r.get<uint32_t>("buffer index");
  b.offset = r.get<uint64_t>("buffer offset");
  b.nbytes = r.get<uint64_t>("buffer size");
  b.elements = r.get<int64_t>("buffer elements");
  return b;
}

void put_refs(Writer& w, const std::vector<BufferRef>& refs) {
  w.put<uint64_t>(refs.size());
  for (const BufferRef& b : refs) put_ref(w, b);
}

std::vector<BufferRef> get_refs(Reader& r, std::string_view field) {
  std::vector<BufferRef> refs(r.count(field, 29));
  for (BufferRef& b : refs) b = get_ref(r);
  return refs;
}

void put_ints(Writer& w, const std::vector<int64_t>& v) {
  w.put<uint64_t>(v.size());
  for (int64_t x : v) w.put<int64_t>(x);
}

std::vector<int64_t> get_ints(Reader& r, std::string_view field) {
  std::vector<int64_t> v(r.count(field, 8));
  for (int64_t& x : v) x = r.get<int64_t>(field);
  return v;
}

}  // namespace

std::vector<uint8_t> write_control(const std::vector<ControlFlow>& cs) {
  Writer w;
  w.put<uint64_t>(cs.size());
  for (const ControlFlow& c : cs) {
    w.put<uint8_t>(static_cast<uint8_t>(c.kind));
    w.put<uint32_t>(c.node);
    w.put<uint32_t>(c.carried);
    w.put<uint32_t>(c.scan_inputs);
    w.put<uint8_t>(c.batched);
    w.put<uint8_t>(c.cond_always_true);
    w.put<uint64_t>(c.operands.size());
    for (size_t i = 0; i < c.operands.size(); ++i) {
      w.put<uint8_t>(c.present[i]);
      put_ref(w, c.operands[i]);
      put_type(w, c.operand_types[i]);
    }
    w.put<uint64_t>(c.results.size());
    for (size_t i = 0; i < c.results.size(); ++i) {
      put_ref(w, c.results[i]);
      put_type(w, c.result_types[i]);
    }
    for (const auto* v : {&c.input_axes, &c.input_reverse, &c.output_axes, &c.output_reverse}) put_ints(w, *v);
    w.put<uint64_t>(c.regions.size());
    for (const RegionPlan& rp : c.regions) {
      put_refs(w, rp.params);
      put_refs(w, rp.returns);
      w.blob(write_steps(rp.steps));
    }
  }
  return w.bytes;
}

std::vector<ControlFlow> read_control(Reader r) {
  std::vector<ControlFlow> cs(r.count("control-flow count", 30));
  for (ControlFlow& c : cs) {
    uint8_t kind = r.get<uint8_t>("control-flow kind");
    if (kind > static_cast<uint8_t>(ControlKind::Scan)) fail("{}: unknown control-flow kind {}", r.what(), kind);
    c.kind = static_cast<ControlKind>(kind);
    c.node = r.get<uint32_t>("control-flow node");
    c.carried = r.get<uint32_t>("carried count");
    c.scan_inputs = r.get<uint32_t>("scan input count");
    c.batched = r.get<uint8_t>("batched flag");
    c.cond_always_true = r.get<uint8_t>("constant condition flag");
    uint64_t n = r.count("operand count", 40);
    for (uint64_t i = 0; i < n; ++i) {
      c.present.push_back(r.get<uint8_t>("operand present flag"));
      c.operands.push_back(get_ref(r));
      c.operand_types.push_back(get_type(r));
    }
    n = r.count("result count", 39);
    for (uint64_t i = 0; i < n; ++i) {
      c.results.push_back(get_ref(r));
      c.result_types.push_back(get_type(r));
    }
    c.input_axes = get_ints(r, "scan input axes");
    c.input_reverse = get_ints(r, "scan input directions");
    c.output_axes = get_ints(r, "scan output axes");
    c.output_reverse = get_ints(r, "scan output directions");
    c.regions.resize(r.count("region count", 24));
    for (RegionPlan& rp : c.regions) {
      rp.params = get_refs(r, "region parameter count");
      rp.returns = get_refs(r, "region result count");
      std::vector<uint8_t> steps = r.blob("region steps");
      rp.steps = read_steps(Reader(steps.data(), steps.size(), r.what() + " (region steps)"));
    }
  }
  r.expect_end();
  return cs;
}

namespace {

// The type a scan body sees of a batched (Scan-8) operand: without its batch dim.
TensorType unbatched(const TensorType& t, bool batched) {
  if (!batched || t.shape.empty()) return t;
  return TensorType(t.dtype, Shape(t.shape.begin() + 1, t.shape.end()));
}

void check_record(const Plan& p, size_t index, std::string_view what) {
  const ControlFlow& c = p.control[index];
  const std::string at = fmt::format("{}: control-flow record {}", what, index);
  auto expect = [&](bool ok, std::string_view msg) {
    if (!ok) fail("{}: {}", at, msg);
  };
  expect(c.present.size() == c.operands.size() && c.operand_types.size() == c.operands.size() &&
             c.result_types.size() == c.results.size(),
         "operand and result lists disagree");
  for (size_t i = 0; i < c.operands.size(); ++i) {
    if (!c.present[i]) continue;
    check_binding(p, c.operands[i], what, fmt::format("control-flow record {} operand {}", index, i));
    expect(c.operands[i].nbytes == c.operand_types[i].nbytes(),
           fmt::format("operand {} binds {} bytes but is {}", i, c.operands[i].nbytes, c.operand_types[i].str()));
  }
  for (size_t i = 0; i < c.results.size(); ++i) {
    check_binding(p, c.results[i], what, fmt::format("control-flow record {} result {}", index, i));
    expect(c.results[i].nbytes == c.result_types[i].nbytes(),
           fmt::format("result {} binds {} bytes but is {}", i, c.results[i].nbytes, c.result_types[i].str()));
  }
  for (size_t r = 0; r < c.regions.size(); ++r) {
    const RegionPlan& rp = c.regions[r];
    const std::string where = fmt::format("control-flow record {} region {}", index, r);
    for (const BufferRef& b : rp.params) check_binding(p, b, what, where + " parameter");
    for (const BufferRef& b : rp.returns) check_binding(p, b, what, where + " result");
    for (size_t i = 0; i < rp.steps.size(); ++i) {
      const Step& s = rp.steps[i];
      if (s.kind == StepKind::Kernel && s.kernel >= p.kernels.size())
        fail("{}: {} step {} names kernel {}, the plan has {}", what, where, i, s.kernel, p.kernels.size());
      // Nested records come after their parent: the runtime's recursion ends.
      if (s.kind == StepKind::Control && (s.kernel <= index || s.kernel >= p.control.size()))
        fail("{}: {} step {} names control-flow record {}: a region may name only later records, and the plan has {}",
             what, where, i, s.kernel, p.control.size());
      for (const BufferRef& b : s.args) check_binding(p, b, what, fmt::format("{} step {}", where, i));
    }
  }
  // What the host-driven run reads and writes, by kind (ir/control_flow.h).
  const size_t nops = c.operands.size(), nres = c.results.size(), carried = c.carried;
  auto bytes_equal = [&](const BufferRef& a, uint64_t n, std::string_view which) {
    expect(a.nbytes == n, fmt::format("{} has {} bytes, expected {}", which, a.nbytes, n));
  };
  switch (c.kind) {
    case ControlKind::If:
      expect(nops >= 1 && c.present[0] && c.operand_types[0].numel() == 1 && c.regions.size() == 2,
             "an if needs a one-element condition and two regions");
      for (const RegionPlan& rp : c.regions)
        expect(rp.params.size() == nops - 1 && rp.returns.size() == nres, "a branch's signature disagrees");
      break;
    case ControlKind::Loop: {
      expect(nops >= 2 + carried && nres >= carried && c.regions.size() == 1, "a loop's operand counts disagree");
      const RegionPlan& b = c.regions[0];
      expect(b.params.size() == nops && b.returns.size() == 1 + nres, "a loop body's signature disagrees");
      expect(!c.present[0] || c.operand_types[0].numel() == 1, "the trip count is not one element");
      expect(!c.present[1] || c.operand_types[1].numel() == 1, "the condition is not one element");
      bytes_equal(b.params[0], 8, "the iteration number");
      bytes_equal(b.params[1], 1, "the condition parameter");
      bytes_equal(b.returns[0], 1, "the body's condition");
      for (size_t j = 0; j < carried; ++j) {
        expect(c.present[2 + j], "a loop-carried operand is absent");
        bytes_equal(b.params[2 + j], c.operands[2 + j].nbytes, "a loop-carried parameter");
        bytes_equal(b.returns[1 + j], c.operands[2 + j].nbytes, "a loop-carried result");
        bytes_equal(c.results[j], c.operands[2 + j].nbytes, "a loop-carried node result");
      }
      for (size_t k = carried; k < nres; ++k) {
        const TensorType& t = c.result_types[k];
        expect(t.rank() >= 1, "a loop's scan output has no iteration dim");
        expect(t.shape[0] == c.result_types[carried].shape[0], "a loop's scan outputs disagree on the trip count");
        // (Of a loop compiled for 0 iterations any iteration is an error at run time.)
        if (t.shape[0] > 0) bytes_equal(b.returns[1 + k], t.nbytes() / uint64_t(t.shape[0]), "a loop's scan element");
      }
      break;
    }
    case ControlKind::Scan: {
      const size_t m = c.scan_inputs, k = nres - std::min(nres, carried);
      expect(m >= 1 && nops >= carried + m && nres >= carried && c.regions.size() == 1,
             "a scan's operand counts disagree");
      expect(c.input_axes.size() == m && c.input_reverse.size() == m && c.output_axes.size() == k &&
                 c.output_reverse.size() == k,
             "a scan's axes disagree with its inputs and outputs");
      const RegionPlan& b = c.regions[0];
      expect(b.params.size() == nops && b.returns.size() == nres, "a scan body's signature disagrees");
      const bool batched = c.batched != 0;
      int64_t batch = 1;
      if (batched) {
        for (size_t i = 0; i < carried + m; ++i)
          expect(c.operand_types[i].rank() >= 1, "a batched scan operand has no batch dim");
        for (size_t i = 0; i < nres; ++i)
          expect(c.result_types[i].rank() >= 1, "a batched scan result has no batch dim");
        batch = c.operand_types[carried].shape[0];
        for (size_t i = 0; i < carried + m; ++i)
          expect(c.operand_types[i].shape[0] == batch, "batched scan operands disagree on the batch");
        for (size_t i = 0; i < nres; ++i)
          expect(c.result_types[i].shape[0] == batch, "batched scan results disagree on the batch");
      }
      for (size_t i = 0; i < carried + m; ++i) expect(c.present[i], "a scan operand is absent");
      int64_t len = -1;
      for (size_t j = 0; j < m; ++j) {
        TensorType t = unbatched(c.operand_types[carried + j], batched);
        expect(c.input_axes[j] >= 0 && c.input_axes[j] < t.rank(), "a scan input axis is out of range");
        int64_t l = t.shape[size_t(c.input_axes[j])];
        expect(len < 0 || l == len, "scan inputs disagree on the sequence length");
        len = l;
        bytes_equal(b.params[carried + j], l ? t.nbytes() / uint64_t(l) : 0, "a scan input slice");
      }
      for (size_t i = 0; i < carried; ++i) {
        uint64_t n = unbatched(c.operand_types[i], batched).nbytes();
        bytes_equal(b.params[i], n, "a scan state parameter");
        bytes_equal(b.returns[i], n, "a scan state result");
        expect(unbatched(c.result_types[i], batched).nbytes() == n, "a scan state result has another size");
      }
      for (size_t o = 0; o < k; ++o) {
        TensorType t = unbatched(c.result_types[carried + o], batched);
        expect(c.output_axes[o] >= 0 && c.output_axes[o] < t.rank(), "a scan output axis is out of range");
        expect(t.shape[size_t(c.output_axes[o])] == len, "a scan output's length disagrees with the inputs'");
        bytes_equal(b.returns[carried + o], len ? t.nbytes() / uint64_t(len) : 0, "a scan output element");
      }
      (void)batch;
      break;
    }
  }
}

}  // namespace

void check_control(const Plan& p, std::string_view what) {
  for (size_t i = 0; i < p.control.size(); ++i) check_record(p, i, what);
}

}  // namespace kiln::plan::detail
