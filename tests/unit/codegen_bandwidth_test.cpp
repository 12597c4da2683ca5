// The bandwidth-bound kernels (docs/codegen.md "Bandwidth-bound kernels"):
// pointwise (vector loads/stores of 16 bytes, a guarded scalar tail),
// softmax / log_softmax and layer normalization (rows read once into
// registers: a warp per short row, a block per long row), group/instance
// normalization (NCHW groups as rows) and transposes, for
// f32/f16/bf16 on sizes that are and are not multiples of the vector width.
// Every kernel compiles with NVRTC for sm_80 and sm_90 without spills and
// matches evaluate_op on the simulator (codegen_op_kernels_util.h's
// tolerances); the aligned cases must really be vectorized (16-byte global
// loads and stores in the sm_90 PTX), and a misaligned buffer must still give
// the right answer through the scalar path.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <regex>

#include "codegen/emitters/data_movement/emit_injective.h"
#include "codegen/emitters/reduction/emit_normalization.h"
#include "codegen/emitters/elementwise/emit_pointwise.h"
#include "codegen/emitters/reduction/emit_reduction.h"
#include "codegen_op_kernels_util.h"

namespace kiln {
namespace {

using op_kernels_test::Case;

codegen::OpKernel as_op_kernel(const std::string& name, const std::string& source, unsigned grid, unsigned block) {
  codegen::OpKernel k;
  k.name = name;
  k.source = source;
  k.grid = grid;
  k.block = block;
  return k;
}

// One emitter per op family, as the sim executor's table picks them.
std::vector<codegen::OpKernel> emit_any(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& ops,
                                        const std::vector<TensorType>& results) {
  if (def.category == OpCategory::Pointwise) {
    auto k = codegen::emit_pointwise_op(def, attrs, ops, results[0]);
    return {as_op_kernel(k.name, k.source, k.grid, k.block)};
  }
  if (def.name == "softmax" || def.name == "log_softmax") {
    auto k = codegen::emit_softmax_op(def, attrs, ops[0]);
    return {as_op_kernel(k.name, k.source, k.grid, k.block)};
  }
  if (codegen::normalization_supported(def.name)) {
    auto k = codegen::emit_normalization(def, attrs, ops, results);
    return {as_op_kernel(k.name, k.source, k.grid, k.block)};
  }
  auto k = codegen::emit_injective_op(def, attrs, ops, results);
  return {as_op_kernel(k.name, k.source, k.grid, k.block)};
}

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

Case make(const std::string& op, std::vector<TensorType> types, AttrMap attrs = {}) {
  Case c;
  c.op = op;
  c.attrs = attrs;
  c.text = op + "(";
  for (size_t i = 0; i < types.size(); ++i) {
    c.operands.push_back(op_kernels_test::data(types[i], 17 * (i + 1) + types[i].numel()));
    c.text += (i ? ", " : "") + types[i].str();
  }
  c.text += ")";
  return c;
}

std::vector<Case> pointwise_cases() {
  std::vector<Case> cs;
  for (DType t : kFloats) {
    for (int64_t n : {1, 7, 8, 1000, 4096 + 3}) cs.push_back(make("add", {{t, {n}}, {t, {n}}}));
    cs.push_back(make("mul", {{t, {3, 40}}, {t, {40}}}));    // row broadcast, 40 % 8 == 0
    cs.push_back(make("sub", {{t, {3, 40}}, {t, {3, 1}}}));  // broadcast along the innermost dim
    cs.push_back(make("add", {{t, {5, 9}}, {t, {9}}}));      // innermost dim not a multiple of the width
    cs.push_back(make("div", {{t, {2, 3, 16}}, {t, {}}}));   // scalar operand
    cs.push_back(make("sigmoid", {{t, {4099}}}));
  }
  return cs;
}

std::vector<Case> softmax_norm_cases() {
  std::vector<Case> cs;
  for (DType t : kFloats) {
    for (int64_t n : {5, 31, 768, 1024, 1000, 20000, 20001}) {
      AttrMap a;
      a.set("axis", int64_t{-1});
      cs.push_back(make("softmax", {{t, {3, n}}}, a));
      cs.push_back(make("layer_normalization", {{t, {3, n}}, {t, {n}}, {t, {n}}}, a));
    }
    AttrMap a;
    a.set("axis", int64_t{-1});
    cs.push_back(make("log_softmax", {{t, {7, 768}}}, a));
    cs.push_back(make("log_softmax", {{t, {2, 9, 13}}}, a));
    cs.push_back(make("layer_normalization", {{t, {2, 5, 24}}, {t, {24}}}, a));  // no bias
    AttrMap a1;
    a1.set("axis", int64_t{1});
    cs.push_back(make("softmax", {{t, {4, 33, 5}}}, a1));  // not the innermost axis
    cs.push_back(make("layer_normalization", {{t, {2, 6, 8}}, {t, {6, 8}}, {t, {8}}}, a1));
    // group / instance normalization (NCHW): rows of C / groups * H * W.
    for (auto [shape, groups] :
         std::vector<std::pair<Shape, int64_t>>{{{2, 6, 5, 7}, 3}, {{2, 8, 32, 32}, 2}, {{1, 4, 3}, 1}}) {
      AttrMap g;
      g.set("num_groups", groups);
      cs.push_back(make("group_normalization", {{t, shape}, {t, {shape[1]}}, {t, {shape[1]}}}, g));
    }
    for (const Shape& shape : std::vector<Shape>{{2, 3, 9, 11}, {1, 4, 64, 64}, {1, 2, 200, 200}})
      cs.push_back(make("instance_normalization", {{t, shape}, {t, {shape[1]}}, {t, {shape[1]}}}));
  }
  return cs;
}

std::vector<Case> transpose_cases() {
  std::vector<Case> cs;
  for (DType t : kFloats) {
    for (auto [shape, perm] : std::vector<std::pair<Shape, std::vector<int64_t>>>{{{33, 65}, {1, 0}},
                                                                                  {{1, 1}, {1, 0}},
                                                                                  {{3, 37, 70}, {0, 2, 1}},
                                                                                  {{5, 7, 9, 11}, {0, 3, 1, 2}},
                                                                                  {{2, 64, 96}, {2, 1, 0}},
                                                                                  {{6, 1, 40}, {2, 1, 0}}}) {
      AttrMap a;
      a.set("perm", perm);
      cs.push_back(make("transpose", {{t, shape}}, a));
    }
  }
  return cs;
}

TEST(CodegenBandwidth, PointwiseMatchesReferenceOnSim) {
  std::vector<Case> cs = pointwise_cases();
  op_kernels_test::run_all(cs, emit_any, "bandwidth pointwise");
}

TEST(CodegenBandwidth, SoftmaxAndLayerNormMatchReferenceOnSim) {
  std::vector<Case> cs = softmax_norm_cases();
  op_kernels_test::run_all(cs, emit_any, "bandwidth softmax/layernorm");
}

TEST(CodegenBandwidth, TransposeMatchesReferenceOnSim) {
  std::vector<Case> cs = transpose_cases();
  op_kernels_test::run_all(cs, emit_any, "bandwidth transpose");
}

// The sm_90 PTX of `k` (compiled through the kernel cache).
std::string ptx_of(const codegen::OpKernel& k) {
  codegen::KernelCache cache;
  codegen::KernelCompiler compiler("sm_90", &cache);
  return compiler.compile({{k.name, k.source}}).at(0).ptx;
}

int count(const std::string& s, const std::regex& re) {
  return static_cast<int>(std::distance(std::sregex_iterator(s.begin(), s.end(), re), std::sregex_iterator()));
}

const std::regex kVecLoad(R"(ld\.global(\.nc)?\.v[24]\.)");
const std::regex kVecStore(R"(st\.global\.v[24]\.)");

codegen::OpKernel emit_case(const Case& c) {
  std::vector<TensorType> ops;
  for (const Tensor& t : c.operands) ops.push_back(t.type());
  auto r = op_kernels_test::infer(c);
  return emit_any(op_registry().get(c.op), c.attrs, ops, *r).at(0);
}

// A silent scalar fallback fails here: the aligned cases load and store 16
// bytes at a time.
TEST(CodegenBandwidth, AlignedCasesAreVectorized) {
  for (DType t : kFloats) {
    AttrMap a;
    a.set("axis", int64_t{-1});
    for (const Case& c : {make("add", {{t, {4096}}, {t, {4096}}}), make("mul", {{t, {3, 40}}, {t, {40}}}),
                          make("softmax", {{t, {4, 1024}}}, a), make("softmax", {{t, {4, 20000}}}, a),
                          make("layer_normalization", {{t, {4, 768}}, {t, {768}}, {t, {768}}}, a),
                          make("instance_normalization", {{t, {2, 4, 32, 32}}, {t, {4}}, {t, {4}}})}) {
      const std::string ptx = ptx_of(emit_case(c));
      EXPECT_GT(count(ptx, kVecLoad), 0) << c.text << ": no vector load in\n" << ptx.substr(0, 4000);
      EXPECT_GT(count(ptx, kVecStore), 0) << c.text << ": no vector store";
    }
  }
}

// Transposes that move the innermost dim go through the shared-memory tile;
// ones that keep it (or only move size-1 dims) keep the generic kernel.
TEST(CodegenBandwidth, TransposesOfTheInnermostDimAreTiled) {
  auto tiled = [](const Shape& s, std::vector<int64_t> perm) {
    AttrMap a;
    a.set("perm", perm);
    const std::string src = emit_case(make("transpose", {{DType::F16, s}}, a)).source;
    return src.find("tile[32][33]") != std::string::npos;
  };
  EXPECT_TRUE(tiled({33, 65}, {1, 0}));
  EXPECT_TRUE(tiled({5, 7, 9, 11}, {0, 3, 1, 2}));
  EXPECT_TRUE(tiled({6, 1, 40}, {2, 1, 0}));
  EXPECT_FALSE(tiled({4, 5, 6}, {1, 0, 2}));  // the innermost dim stays: rows copied as they are
  EXPECT_FALSE(tiled({4, 1, 6}, {1, 0, 2}));  // only a size-1 dim moves
  EXPECT_FALSE(tiled({3, 4, 5}, {0, 1, 2}));  // identity
}

// Misaligned buffers (a view starting one element into its allocation) take
// the scalar path and still give the reference's result; the simulator's
// checked casts would stop a misaligned vector access.
TEST(CodegenBandwidth, MisalignedBuffersTakeTheScalarPath) {
  AttrMap a;
  a.set("axis", int64_t{-1});
  std::vector<Case> cs = {
      make("add", {{DType::F32, {1003}}, {DType::F32, {1003}}}), make("softmax", {{DType::F16, {3, 768}}}, a),
      make("layer_normalization", {{DType::BF16, {2, 1024}}, {DType::BF16, {1024}}, {DType::BF16, {1024}}}, a)};
  std::vector<codegen::KernelSource> sources;
  std::vector<codegen::OpKernel> ks;
  for (const Case& c : cs) {
    ks.push_back(emit_case(c));
    sources.push_back({ks.back().name, ks.back().source});
  }
  codegen::SimCompiler sim;
  auto entries = sim.compile(sources);
  for (size_t ci = 0; ci < cs.size(); ++ci) {
    const Case& c = cs[ci];
    const std::vector<TensorType> res = *op_kernels_test::infer(c);
    std::vector<const Tensor*> ins;
    for (const Tensor& t : c.operands) ins.push_back(&t);
    Tensor want = evaluate_op(op_registry().get(c.op), c.attrs, ins, res, "node")[0];
    // Every buffer copied one element past a 16-byte boundary.
    std::vector<std::vector<uint8_t>> store;
    std::vector<void*> bufs;
    std::vector<long long> counts;
    auto place = [&](const Tensor& t) {
      const size_t es = dtype_size(t.dtype());
      store.emplace_back(t.nbytes() + 64);
      uint8_t* p = store.back().data();
      p += (16 - reinterpret_cast<uintptr_t>(p) % 16) % 16 + es;
      std::memcpy(p, t.raw(), t.nbytes());
      bufs.push_back(p);
      counts.push_back(t.numel());
    };
    store.reserve(8);
    Tensor out(res[0]);
    place(out);
    for (const Tensor& t : c.operands) place(t);
    sim::LaunchConfig cfg;
    cfg.kernel = ks[ci].name;
    cfg.grid = dim3(ks[ci].grid);
    cfg.block = dim3(ks[ci].block);
    ASSERT_NO_THROW(codegen::sim_launch(entries.at(ks[ci].name), cfg, bufs, counts)) << c.text;
    std::memcpy(out.raw(), bufs[0], out.nbytes());
    int bad = 0;
    for (int64_t i = 0; i < out.numel(); ++i)
      if (!op_kernels_test::close(out.dtype(), out.get_double(i), want.get_double(i)) && bad++ == 0)
        ADD_FAILURE() << c.text << ": element " << i << ": got " << out.get_double(i) << " want " << want.get_double(i);
    EXPECT_EQ(bad, 0) << c.text;
  }
}

}  // namespace
}  // namespace kiln
