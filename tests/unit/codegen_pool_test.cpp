// The pool emitter (codegen/emitters/pool_select_loss/emit_pool.h) against the reference: max_pool
// (with and without indices, storage_order 1, ceil_mode, dilations, pads,
// 1-D/2-D/3-D, NaN, integers, f16 nhwc as ResNet-50's first pool), average_pool
// (count_include_pad 0/1, ceil_mode, nhwc), lp_pool (p 1/2/3), the global
// pools (both layouts, f16, a size-1 plane) and max_unpool (duplicate indices,
// an index outside the output: both the reference and the kernel stop).
// Harness: codegen_op_kernels_util.h (NVRTC sm_80/sm_90, simulator vs evaluate_op).
#include "codegen/emitters/pool_select_loss/emit_pool.h"
#include "codegen_op_kernels_util.h"

namespace kiln {
namespace {

using op_kernels_test::Case;
using op_kernels_test::data;

AttrMap window(std::vector<int64_t> k, std::vector<int64_t> strides = {}, std::vector<int64_t> pads = {},
               std::vector<int64_t> dil = {}, int64_t ceil = 0) {
  // Every window attribute is explicit in kiln (the adapter fills ONNX's defaults).
  AttrMap a;
  a.set("kernel_shape", k);
  a.set("strides", strides.empty() ? std::vector<int64_t>(k.size(), 1) : strides);
  a.set("pads", pads.empty() ? std::vector<int64_t>(2 * k.size(), 0) : pads);
  a.set("dilations", dil.empty() ? std::vector<int64_t>(k.size(), 1) : dil);
  if (ceil) a.set("ceil_mode", ceil);
  return a;
}

TensorType nhwc(DType t, Shape s) { return TensorType(t, std::move(s), Layout::NHWC); }

std::vector<Case> pool_cases() {
  std::vector<Case> cs;
  uint64_t seed = 1;
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
  const TensorType x2(DType::F32, {2, 3, 9, 11});
  // max_pool
  add("max_pool", window({3, 3}, {2, 2}, {1, 1, 1, 1}), x2, 2, "k3 s2 p1 + indices", true, {5, 40});
  {
    AttrMap a = window({3, 2}, {2, 1}, {1, 0, 0, 1});
    a.set("storage_order", int64_t{1});
    add("max_pool", a, x2, 2, "storage_order 1, asymmetric pads", true);
  }
  add("max_pool", window({3, 3}, {2, 2}, {0, 0, 0, 0}, {}, 1), x2, 2, "ceil_mode");
  add("max_pool", window({2, 3}, {1, 2}, {1, 1, 1, 1}, {2, 2}), x2, 1, "dilations 2");
  add("max_pool", window({3}, {2}, {1, 1}), TensorType(DType::F32, {2, 3, 17}), 2, "1-D");
  add("max_pool", window({2, 3, 2}, {2, 2, 1}, {1, 0, 1, 0, 1, 1}), TensorType(DType::F32, {1, 2, 5, 6, 7}), 2, "3-D");
  add("max_pool", window({3, 3}, {2, 2}, {1, 1, 1, 1}), TensorType(DType::I32, {1, 2, 7, 7}), 2, "i32");
  add("max_pool", window({2, 2}, {2, 2}), TensorType(DType::U8, {1, 1, 6, 6}), 1, "u8");
  add("max_pool", window({2, 2}, {1, 1}, {0, 0, 1, 1}), TensorType(DType::F64, {1, 2, 5, 5}), 2, "f64");
  {
    AttrMap a = window({3, 3}, {2, 2}, {1, 1, 1, 1});
    a.set("layout", std::string("nhwc"));
    add("max_pool", a, nhwc(DType::F16, {1, 11, 13, 40}), 1, "f16 nhwc (ResNet-50 stem)");
    add("max_pool", a, nhwc(DType::F32, {2, 9, 9, 3}), 1, "nhwc", true, {7});
  }
  // A long output: more elements than one block, several grid-stride rounds on the simulator's grid.
  add("max_pool", window({2, 2}, {1, 1}), TensorType(DType::F32, {2, 4, 33, 35}), 1, "many blocks");
  // average_pool
  for (int64_t cip : {0, 1}) {
    AttrMap a = window({3, 3}, {2, 2}, {1, 1, 1, 1});
    a.set("count_include_pad", cip);
    add("average_pool", a, x2, 1, fmt::format("pads, count_include_pad {}", cip), false, {3});
    AttrMap c = window({3, 3}, {2, 2}, {0, 1, 1, 0}, {}, 1);
    c.set("count_include_pad", cip);
    add("average_pool", c, x2, 1, fmt::format("ceil_mode, count_include_pad {}", cip));
  }
  add("average_pool", window({2, 2}, {1, 1}, {}, {2, 1}), TensorType(DType::F16, {1, 3, 8, 8}), 1, "f16 dilations");
  add("average_pool", window({4}, {3}, {2, 2}), TensorType(DType::F64, {2, 2, 10}), 1, "1-D f64");
  add("average_pool", window({2, 2, 2}, {1, 2, 2}, {1, 1, 1, 1, 1, 1}), TensorType(DType::F32, {1, 2, 4, 5, 6}), 1,
      "3-D");
  {
    AttrMap a = window({3, 3}, {1, 1}, {1, 1, 1, 1});
    a.set("layout", std::string("nhwc"));
    add("average_pool", a, nhwc(DType::BF16, {1, 7, 7, 34}), 1, "bf16 nhwc");
  }
  // lp_pool
  for (int64_t p : {1, 2, 3}) {
    AttrMap a = window({3, 2}, {2, 1}, {1, 0, 1, 0});
    a.set("p", p);
    add("lp_pool", a, x2, 1, fmt::format("p {}", p));
  }
  // global pools
  for (const char* op : {"global_average_pool", "global_max_pool", "global_lp_pool"}) {
    add(op, AttrMap(), TensorType(DType::F32, {2, 3, 9, 11}), 1, "nchw", false, {10});
    add(op, AttrMap(), TensorType(DType::F16, {2, 300, 1, 1}), 1, "f16, size-1 planes, many of them");
    add(op, AttrMap(), TensorType(DType::F64, {1, 2, 4, 5, 3}), 1, "3-D f64");
    AttrMap a;
    a.set("layout", std::string("nhwc"));
    add(op, a, nhwc(DType::F32, {2, 7, 7, 40}), 1, "nhwc");
  }
  {
    AttrMap a;
    a.set("p", int64_t{3});
    add("global_lp_pool", a, TensorType(DType::F32, {1, 4, 6}), 1, "p 3, 1-D");
  }
  // Large planes: a block per plane; NaN first in plane 0 (kept), inside plane 1 (skipped by max).
  for (const char* op : {"global_average_pool", "global_max_pool", "global_lp_pool"}) {
    add(op, AttrMap(), TensorType(DType::F32, {1, 3, 40, 40}), 1, "block per plane", false, {0, 1700});
    AttrMap a;
    a.set("layout", std::string("nhwc"));
    add(op, a, nhwc(DType::F16, {1, 33, 33, 5}), 1, "nhwc block per plane", false, {3});
  }
  add("global_max_pool", AttrMap(), TensorType(DType::I64, {2, 2, 1030}), 1, "i64 block per plane");
  add("global_max_pool", AttrMap(), TensorType(DType::I32, {2, 3, 5, 5}), 1, "i32");
  return cs;
}

std::vector<Case> unpool_cases() {
  std::vector<Case> cs;
  auto add = [&](Shape xs, Shape os, std::vector<int64_t> idx, std::string what, bool bad = false, Shape is = {},
                 DType dt = DType::F32) {
    Case c;
    c.op = "max_unpool";
    c.attrs.set("output_shape", os);
    if (!is.empty()) c.attrs.set("index_shape", is);
    Tensor x = data(TensorType(dt, xs), 77);
    Tensor ind(TensorType(DType::I64, xs));
    for (int64_t i = 0; i < ind.numel(); ++i) ind.data<int64_t>()[i] = idx[i % idx.size()] + i / idx.size() * 7;
    c.operands = {x, ind};
    c.text = "max_unpool " + what;
    c.expect_error = bad;
    cs.push_back(std::move(c));
  };
  add({1, 2, 2, 2}, {1, 2, 4, 4}, {0, 3, 9, 14, 16, 19, 25, 31}, "distinct indices");
  add({1, 2, 3, 3}, {1, 2, 6, 6}, {1, 1, 5, 40, 40, 2, 11, 1, 60}, "duplicates: the later element wins");
  add({1, 1, 2, 2}, {1, 1, 5, 5}, {0, 4, 12, 15}, "index_shape [1,1,4,4] inside a larger output", false, {1, 1, 4, 4});
  add({1, 1, 2, 2}, {1, 1, 4, 4}, {0, 4, 12, 16}, "an index outside the output", true);
  add({1, 2, 3, 3}, {1, 2, 6, 6}, {1, 1, 5, 40, 40, 2, 11, 1, 60}, "f64 duplicates", false, {}, DType::F64);
  add({1, 2, 3, 3}, {1, 2, 6, 6}, {1, 1, 5, 40, 40, 2, 11, 1, 60}, "f16 duplicates (the scan)", false, {}, DType::F16);
  add({1, 1, 2, 2}, {1, 1, 4, 4}, {0, 4, 12, -1}, "f16: a negative index", true, {}, DType::F16);
  return cs;
}

TEST(CodegenPool, EveryPoolOpCompilesAndMatchesReferenceOnSim) {
  std::vector<Case> cases = pool_cases();
  for (Case& c : unpool_cases()) cases.push_back(std::move(c));
  ASSERT_GT(cases.size(), 40u);
  op_kernels_test::run_all(
      cases,
      [](const OpDef& d, const AttrMap& a, const std::vector<TensorType>& o, const std::vector<TensorType>& r) {
        return codegen::emit_pool_op(d, a, o, r);
      },
      "pool");
}

// The seams: every kernel reads operand 0 through KILN_LOAD_X and stores
// through KILN_STORE only; the launch heuristic.
TEST(CodegenPool, KernelsUseTheSeamsAndLaunchOneThreadPerResult) {
  const OpDef& mp = op_registry().get("max_pool");
  AttrMap a = window({3, 3}, {2, 2}, {1, 1, 1, 1});
  TensorType x(DType::F32, {1, 4, 16, 16});
  TensorType y(DType::F32, {1, 4, 8, 8}), idx(DType::I64, {1, 4, 8, 8});
  auto ks = codegen::emit_pool_op(mp, a, {x}, {y, idx});
  ASSERT_EQ(ks.size(), 1u);
  const std::string& s = ks[0].source;
  EXPECT_NE(s.find("#define KILN_LOAD_X(i)"), std::string::npos);
  EXPECT_NE(s.find("KILN_STORE(1, o,"), std::string::npos);
  // No direct access to in0/out0 in the kernel body: only in the macros and the sim entry.
  const size_t body = s.find("__global__ void");
  const size_t end = s.find("#undef KILN_LOAD_X");
  ASSERT_NE(body, std::string::npos);
  const std::string kernel = s.substr(s.find('{', body), end - body);
  EXPECT_EQ(kernel.find("in0["), std::string::npos) << kernel;
  EXPECT_EQ(kernel.find("out0["), std::string::npos) << kernel;
  EXPECT_EQ(ks[0].block, 256u);
  EXPECT_EQ(ks[0].grid, 1u);  // 256 results
  // A global pool with a thread per plane: blocks of 256 threads, fewer where that would leave some of
  // an H100's 132 SMs without a block (ResNet-50's average pool: 2048 planes in 64 one-warp blocks).
  AttrMap nhwc;
  nhwc.set("layout", std::string("nhwc"));
  const OpDef& gap = op_registry().get("global_average_pool");
  auto gp = codegen::emit_pool_op(gap, nhwc, {TensorType(DType::F32, {1, 7, 7, 2048})},
                                  {TensorType(DType::F32, {1, 1, 1, 2048})});
  ASSERT_EQ(gp.size(), 1u);
  EXPECT_EQ(gp[0].block, 32u);
  EXPECT_EQ(gp[0].grid, 64u);
  gp = codegen::emit_pool_op(gap, nhwc, {TensorType(DType::F32, {32, 7, 7, 2048})},
                             {TensorType(DType::F32, {32, 1, 1, 2048})});
  EXPECT_EQ(gp[0].block, 256u);
  EXPECT_EQ(gp[0].grid, 256u);
  EXPECT_THROW(codegen::emit_pool_op(mp, a, {x}, {TensorType(DType::F32, {1, 4, 7, 8})}), Error);
  EXPECT_THROW(codegen::emit_pool_op(op_registry().get("relu"), a, {x}, {y}), Error);
}

}  // namespace
}  // namespace kiln
