// The select/scan emitter (codegen/emitters/pool_select_loss/emit_select.h: argmax, argmin, hardmax,
// cumsum, cumprod, topk) and the loss emitter (codegen/emitters/pool_select_loss/emit_loss.h: nll_loss,
// softmax_cross_entropy_loss) against the reference on edge shapes: lines
// taken by a block (n >= 128, inner < 32) and by a thread, NaN lines, ties
// (select_last_index), keepdims, integers, f16; cumsum exclusive/reverse on
// long lines (the block scan), integer wrap-around, an empty tensor; cumprod
// the same on factors near 1 and on wrapping integers; topk
// largest/smallest with ties and NaN, k = n, k = 0, a middle axis; losses with
// every reduction, weights, ignore_index (also all ignored: mean = NaN), the
// log_prob result, f16, and an out-of-range target (both sides stop).
// Harness: codegen_op_kernels_util.h (NVRTC sm_80/sm_90, simulator vs evaluate_op).
#include "codegen/emitters/pool_select_loss/emit_loss.h"
#include "codegen/emitters/pool_select_loss/emit_select.h"
#include "codegen_op_kernels_util.h"

namespace kiln {
namespace {

using op_kernels_test::Case;
using op_kernels_test::data;

std::vector<codegen::OpKernel> emit_any(const OpDef& def, const AttrMap& a, const std::vector<TensorType>& ops,
                                        const std::vector<TensorType>& res) {
  if (codegen::loss_supported(def.name)) return codegen::emit_loss_op(def, a, ops, res);
  return codegen::emit_select_op(def, a, ops, res);
}

std::vector<Case> select_cases() {
  std::vector<Case> cs;
  uint64_t seed = 100;
  auto add = [&](std::string op, AttrMap a, TensorType x, int results, std::string what, bool ties = false,
                 std::vector<int64_t> nans = {}) {
    Case c;
    c.op = std::move(op);
    c.attrs = std::move(a);
    c.operands = {data(x, seed++, ties, std::move(nans))};
    c.num_results = results;
    c.text = fmt::format("{} {} {}", c.op, x.str(), what);
    cs.push_back(std::move(c));
  };
  struct Line {
    Shape shape;
    int64_t axis;
    const char* what;
  };
  const std::vector<Line> lines = {{{5, 300}, 1, "block per line"},
                                   {{37, 6}, 0, "thread per line, first axis"},
                                   {{4, 7, 33}, 1, "middle axis"},
                                   {{3, 200, 5}, 1, "long middle axis, inner 5 (block)"},
                                   {{4, 1, 3}, 1, "size-1 axis"}};
  for (const char* op : {"argmax", "argmin"}) {
    for (size_t li = 0; li < lines.size(); ++li)
      for (int64_t last : {0, 1}) {
        const Line& l = lines[li];
        // Fewer kernels (NVRTC's cold time): argmin on a block line and a long middle axis, argmax on four.
        if (li == 1 || (std::string(op) == "argmin" && (li == 2 || li == 4))) continue;
        AttrMap a;
        a.set("axis", l.axis);
        a.set("select_last_index", last);
        a.set("keepdims", last);  // both keepdims forms
        add(op, a, TensorType(DType::F32, l.shape), 1, fmt::format("{} ties, last {}", l.what, last), true,
            {3, 11, 12, 650});
      }
    AttrMap a;
    a.set("axis", int64_t{-1});
    add(op, a, TensorType(DType::I32, {6, 150}), 1, "i32 block");
    add(op, a, TensorType(DType::F16, {6, 10}), 1, "f16", true);
    add(op, a, TensorType(DType::U8, {3, 9}), 1, "u8");
  }
  for (const Line& l : lines) {
    AttrMap a;
    a.set("axis", l.axis);
    if (l.shape.size() == 2 && l.axis == 0) continue;  // the thread form is covered by the middle axis
    add("hardmax", a, TensorType(DType::F32, l.shape), 1, std::string(l.what) + " ties", true, {3, 11, 12, 650});
  }
  {
    AttrMap a;
    add("hardmax", a, TensorType(DType::F16, {3, 130}), 1, "f16 block", true);
    add("hardmax", a, TensorType(DType::F64, {3, 5}), 1, "f64");
  }
  // cumsum: every exclusive/reverse form on a block-scanned line and a thread line.
  for (int64_t ex : {0, 1})
    for (int64_t rev : {0, 1}) {
      AttrMap a;
      a.set("axis", int64_t{1});
      a.set("exclusive", ex);
      a.set("reverse", rev);
      add("cumsum", a, TensorType(DType::F32, {3, 1000}), 1,
          fmt::format("block scan, exclusive {} reverse {}", ex, rev));
      if (ex == rev)
        add("cumsum", a, TensorType(DType::I32, {4, 6, 40}), 1,
            fmt::format("thread lines, exclusive {} reverse {}", ex, rev));
    }
  {
    AttrMap a;
    a.set("axis", int64_t{0});
    add("cumsum", a, TensorType(DType::F64, {7}), 1, "1-D f64");
    add("cumsum", a, TensorType(DType::I64, {300, 2}), 1, "i64 block, inner 2");
    add("cumsum", a, TensorType(DType::F16, {129}), 1, "f16 block");
    add("cumsum", a, TensorType(DType::F32, {0, 5}), 1, "empty");
    a.set("axis", int64_t{-1});
    add("cumsum", a, TensorType(DType::F32, {2, 5000}), 1, "long lines", false, {4000});
  }
  // cumprod: the same scans with a product; factors near 1 so the long lines keep a magnitude worth
  // comparing (products of the seeded normals would underflow), integers wrapping.
  auto near_one = [&](TensorType t, std::string what) {
    Case c;
    c.op = "cumprod";
    c.attrs.set("axis", int64_t{-1});
    Tensor x = data(t, seed++);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, 1.0 + x.get_double(i) / 64);
    c.operands = {x};
    c.text = fmt::format("cumprod {} {}", t.str(), what);
    cs.push_back(std::move(c));
  };
  near_one(TensorType(DType::F32, {3, 1000}), "block scan");
  near_one(TensorType(DType::F64, {2, 5000}), "long lines");
  for (int64_t ex : {0, 1})
    for (int64_t rev : {0, 1}) {
      AttrMap a;
      a.set("axis", int64_t{1});
      a.set("exclusive", ex);
      a.set("reverse", rev);
      add("cumprod", a, TensorType(DType::I32, {3, 300}), 1,
          fmt::format("i32 block scan (wraps), exclusive {} reverse {}", ex, rev));
      if (ex != rev)
        add("cumprod", a, TensorType(DType::F64, {4, 6, 7}), 1,
            fmt::format("thread lines, exclusive {} reverse {}", ex, rev));
    }
  {
    AttrMap a;
    a.set("axis", int64_t{0});
    add("cumprod", a, TensorType(DType::I64, {300, 2}), 1, "i64 block, inner 2");
    add("cumprod", a, TensorType(DType::F32, {0, 5}), 1, "empty");
  }
  // topk
  for (int64_t largest : {1, 0}) {
    AttrMap a;
    a.set("k", int64_t{5});
    a.set("largest", largest);
    add("topk", a, TensorType(DType::F32, {5, 37}), 2, fmt::format("ties + NaN, largest {}", largest), true,
        {3, 40, 41});
    a.set("k", int64_t{37});
    add("topk", a, TensorType(DType::F32, {5, 37}), 2, fmt::format("k = n, largest {}", largest), true, {3, 40});
    a.set("k", int64_t{3});
    a.set("axis", int64_t{1});
    add("topk", a, TensorType(DType::I64, {4, 10, 6}), 2, fmt::format("middle axis i64, largest {}", largest));
  }
  {
    AttrMap a;
    a.set("k", int64_t{0});
    add("topk", a, TensorType(DType::F32, {3, 8}), 2, "k = 0");
    a.set("k", int64_t{10});
    add("topk", a, TensorType(DType::F16, {2, 1000}), 2, "f16, 1000-long lines");
    add("topk", a, TensorType(DType::F32, {2, 4096}), 1, "4096-long lines, values only", true);
    a.set("k", int64_t{1});
    add("topk", a, TensorType(DType::F64, {3, 1}), 2, "n = 1");
  }
  return cs;
}

std::vector<Case> loss_cases() {
  std::vector<Case> cs;
  uint64_t seed = 500;
  auto add = [&](std::string op, std::string red, Shape xs, DType dt, bool weight, std::optional<int64_t> ii,
                 int results, std::string what, bool bad_target = false, bool all_ignored = false) {
    Case c;
    c.op = std::move(op);
    c.attrs.set("reduction", red);
    if (ii) c.attrs.set("ignore_index", *ii);
    const int64_t C = xs[1];
    Shape ts = xs;
    ts.erase(ts.begin() + 1);
    Tensor x = data(TensorType(dt, xs), seed++);
    Tensor t(TensorType(DType::I64, ts));
    std::mt19937_64 rng(seed++);
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t v = static_cast<int64_t>(rng() % C);
      if (ii && (i % 3 == 1 || all_ignored)) v = *ii;
      t.data<int64_t>()[i] = v;
    }
    if (bad_target) t.data<int64_t>()[t.numel() - 1] = C;
    c.operands = {x, t};
    if (weight) {
      Tensor w = data(TensorType(dt, {C}), seed++);
      for (int64_t i = 0; i < C; ++i) w.set_double(i, std::fabs(w.get_double(i)) + 0.1);
      c.operands.push_back(w);
    }
    c.num_results = results;
    c.expect_error = bad_target;
    c.text = fmt::format("{} {} reduction {}{}{} {}", c.op, x.type().str(), red, weight ? " weighted" : "",
                         ii ? fmt::format(" ii {}", *ii) : "", what);
    cs.push_back(std::move(c));
  };
  for (const char* op : {"nll_loss", "softmax_cross_entropy_loss"}) {
    const bool sce = std::string(op) != "nll_loss";
    for (const char* red : {"none", "sum", "mean"}) {
      if (std::string(red) != "sum") add(op, red, {3, 5}, DType::F32, false, std::nullopt, 1, "[N, C]");
      add(op, red, {2, 4, 3, 2}, DType::F32, true, int64_t{-1}, sce ? 2 : 1, "weighted, ii -1");
      if (std::string(red) != "sum")
        add(op, red, {2, 3, 300}, DType::F32, true, int64_t{2}, 1, "many elements, ii a class");
    }
    add(op, "mean", {2, 4, 3}, DType::F32, true, int64_t{1}, 1, "all ignored: NaN", false, true);
    add(op, "mean", {2, 5, 3}, DType::F16, true, std::nullopt, sce ? 2 : 1, "f16");
    add(op, "none", {2, 5, 3}, DType::F64, false, int64_t{0}, 1, "f64");
    add(op, "sum", {2, 5, 3}, DType::F32, false, std::nullopt, 1, "target out of range", true);
  }
  return cs;
}

TEST(CodegenSelect, EverySelectAndLossOpCompilesAndMatchesReferenceOnSim) {
  std::vector<Case> cases = select_cases();
  for (Case& c : loss_cases()) cases.push_back(std::move(c));
  ASSERT_GT(cases.size(), 55u);
  op_kernels_test::run_all(cases, emit_any, "select/scan/loss");
}

// The seams as a fused anchor would replace them: argmax reading operand 0
// through a negating "prologue" must give argmin's answer (ties and NaN
// included), and cumsum storing through a doubling "epilogue" twice the sums.
TEST(CodegenSelect, KernelsRunThroughReplacedSeams) {
  const TensorType x(DType::F32, {6, 150}), idx(DType::I64, {6, 1});
  const TensorType xi(DType::I32, {5, 7});
  AttrMap a;
  a.set("axis", int64_t{1});
  codegen::KernelSeams neg;
  neg.buffers = {{DType::I64, "out0", true}, {DType::F32, "in0", false}};
  neg.load_x = [](const std::string& i, bool) { return "(-in0[" + i + "])"; };
  neg.store = [](int r, const std::string& i, const std::string& v) { return fmt::format("out{}[{}] = {};", r, i, v); };
  auto am = codegen::emit_select_op(op_registry().get("argmax"), a, {x}, {idx}, &neg);
  codegen::KernelSeams twice;
  twice.buffers = {{DType::I32, "out0", true}, {DType::I32, "in0", false}};
  twice.load_x = [](const std::string& i, bool) { return "in0[" + i + "]"; };
  twice.store = [](int r, const std::string& i, const std::string& v) {
    return fmt::format("const int t = {};\nout{}[{}] = t * 2;", v, r, i);
  };
  auto cs = codegen::emit_select_op(op_registry().get("cumsum"), a, {xi}, {xi}, &twice);
  ASSERT_EQ(am.size(), 1u);
  ASSERT_EQ(cs.size(), 1u);
  codegen::SimCompiler sim;
  auto entries = sim.compile({{am[0].name, am[0].source}, {cs[0].name, cs[0].source}});
  codegen::KernelCompiler nvrtc("sm_90");
  EXPECT_NO_THROW(nvrtc.compile({{am[0].name, am[0].source}, {cs[0].name, cs[0].source}}));
  auto launch = [&](const codegen::OpKernel& k, Tensor& out, const Tensor& in) {
    sim::LaunchConfig cfg;
    cfg.kernel = k.name;
    cfg.grid = dim3(k.grid);
    cfg.block = dim3(k.block);
    codegen::sim_launch(entries.at(k.name), cfg, {out.raw(), const_cast<void*>(in.raw())},
                        {static_cast<long long>(out.numel()), static_cast<long long>(in.numel())});
  };
  Tensor xv = data(x, 9, true, {3, 160, 161});
  Tensor got(idx);
  launch(am[0], got, xv);
  Tensor want = evaluate_op(op_registry().get("argmin"), a, {&xv}, {idx}, "node")[0];
  for (int64_t i = 0; i < idx.numel(); ++i) EXPECT_EQ(got.data<int64_t>()[i], want.data<int64_t>()[i]) << i;
  Tensor xiv = data(xi, 10);
  Tensor gi(xi);
  launch(cs[0], gi, xiv);
  Tensor wi = evaluate_op(op_registry().get("cumsum"), a, {&xiv}, {xi}, "node")[0];
  for (int64_t i = 0; i < xi.numel(); ++i) EXPECT_EQ(gi.data<int32_t>()[i], 2 * wi.data<int32_t>()[i]) << i;
}

TEST(CodegenSelect, LaunchHeuristicsAndLimits) {
  AttrMap a;
  a.set("axis", int64_t{1});
  const OpDef& am = op_registry().get("argmax");
  auto blk = codegen::emit_select_op(am, a, {TensorType(DType::F32, {5, 300})}, {TensorType(DType::I64, {5, 1})});
  EXPECT_EQ(blk[0].grid, 5u);  // a block per line
  EXPECT_EQ(blk[0].block, 256u);
  auto thr = codegen::emit_select_op(am, a, {TensorType(DType::F32, {5, 30})}, {TensorType(DType::I64, {5, 1})});
  EXPECT_EQ(thr[0].grid, 1u);  // a thread per line
  AttrMap t;
  t.set("k", int64_t{3});
  const OpDef& tk = op_registry().get("topk");
  auto k = codegen::emit_select_op(tk, t, {TensorType(DType::F32, {2, 100})},
                                   {TensorType(DType::F32, {2, 3}), TensorType(DType::I64, {2, 3})});
  EXPECT_EQ(k[0].shared_bytes, 128u * 8);
  EXPECT_THROW(codegen::emit_select_op(tk, t, {TensorType(DType::F32, {2, 5000})},
                                       {TensorType(DType::F32, {2, 3}), TensorType(DType::I64, {2, 3})}),
               Unsupported);
}

}  // namespace
}  // namespace kiln
