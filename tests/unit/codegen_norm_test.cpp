// The normalization emitter (codegen/emitters/reduction/emit_normalization.h) against the
// reference: layer / group / instance / batch normalization, lrn,
// mean_variance_normalization and lp_normalization on shapes with odd sizes,
// size-1 dims, groups longer than a block (300 > 256), both layouts, f32 /
// f16 / f64, optional operands and results. All nodes sit in one graph, so
// one simulator build and one NVRTC batch serve every case.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/emitters/reduction/emit_normalization.h"
#include "ir/error.h"
#include "ops/registry.h"
#include "tests/unit/codegen_graph_check.h"

namespace kiln {
namespace {

using I = std::vector<int64_t>;

struct Builder {
  Graph g;
  std::vector<Value*> outs;
  int next = 0;

  Value* input(DType t, Shape s, const char* prefix = "x") {
    return g.add_input(fmt::format("{}{}", prefix, next++), TensorType(t, std::move(s)));
  }

  void node(const std::string& op, std::vector<Value*> ins, const AttrMap& a, int results = 1) {
    const OpDef& def = op_registry().get(op);
    InferContext ic(op, ins, a, results, op);
    std::vector<TensorType> types = infer_types(def, ic);
    types.resize(results);
    Node* n = g.add_node(op, ins, types, a, fmt::format("{}_{}", op, next));
    for (int r = 0; r < results; ++r) outs.push_back(n->output(r));
  }
};

AttrMap attrs(std::initializer_list<std::pair<const char*, Attribute>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

std::unique_ptr<Builder> all_cases() {
  auto b = std::make_unique<Builder>();
  const DType f32 = DType::F32, f16 = DType::F16, f64 = DType::F64;
  // layer_normalization: rows longer than a block with all three results;
  // a middle axis without bias; a broadcast [1,9] scale; f16; f64 over all dims.
  b->node("layer_normalization", {b->input(f32, {3, 5, 300}), b->input(f32, {300}), b->input(f32, {300})},
          attrs({{"axis", int64_t{-1}}, {"epsilon", 1e-5f}}), 3);
  b->node("layer_normalization", {b->input(f32, {4, 3, 5}), b->input(f32, {3, 5})}, attrs({{"axis", int64_t{1}}}), 2);
  b->node("layer_normalization", {b->input(f32, {2, 4, 9}), b->input(f32, {1, 9}), b->input(f32, {4, 1})},
          attrs({{"axis", int64_t{1}}, {"epsilon", 0.1f}}));
  b->node("layer_normalization", {b->input(f16, {6, 70}), b->input(f16, {70}), b->input(f16, {70})},
          attrs({{"axis", int64_t{-1}}}));
  b->node("layer_normalization", {b->input(f64, {2, 1, 9}), b->input(f64, {2, 1, 9})}, attrs({{"axis", int64_t{0}}}));
  // Rows per warp-row block: 301 rows give 2 per block (151 blocks, the last half empty), 530 rows 4 (133).
  b->node("layer_normalization", {b->input(f16, {301, 24}), b->input(f16, {24}), b->input(f16, {24})},
          attrs({{"axis", int64_t{-1}}}));
  b->node("layer_normalization", {b->input(f32, {530, 8}), b->input(f32, {8})}, attrs({{"axis", int64_t{-1}}}));
  // group / instance normalization, both layouts.
  b->node("group_normalization", {b->input(f32, {2, 6, 5, 7}), b->input(f32, {6}), b->input(f32, {6})},
          attrs({{"num_groups", int64_t{3}}, {"epsilon", 1e-5f}}));
  b->node("group_normalization", {b->input(f32, {2, 5, 7, 6}), b->input(f32, {6}), b->input(f32, {6})},
          attrs({{"num_groups", int64_t{2}}, {"layout", std::string("nhwc")}}));
  b->node("group_normalization", {b->input(f16, {1, 4, 33}), b->input(f16, {4}), b->input(f16, {4})},
          attrs({{"num_groups", int64_t{2}}}));
  b->node("instance_normalization", {b->input(f32, {2, 3, 17}), b->input(f32, {3}), b->input(f32, {3})},
          attrs({{"epsilon", 1e-5f}}));
  b->node("instance_normalization", {b->input(f32, {2, 4, 4, 3}), b->input(f32, {3}), b->input(f32, {3})},
          attrs({{"layout", std::string("nhwc")}}));
  b->node("instance_normalization", {b->input(f64, {1, 2, 300}), b->input(f64, {2}), b->input(f64, {2})}, {});
  // batch_normalization (var inputs are made non-negative by the feed).
  for (auto [t, s, layout] : {std::tuple{f32, Shape{2, 3, 4, 5}, "nchw"}, std::tuple{f32, Shape{2, 4, 5, 3}, "nhwc"},
                              std::tuple{f16, Shape{3, 7}, "nchw"}}) {
    const int64_t c = std::string(layout) == "nhwc" ? s.back() : s[1];
    std::vector<Value*> ins = {b->input(t, s)};
    for (int i = 0; i < 4; ++i) ins.push_back(b->input(t, {c}, i == 3 ? "var" : "p"));
    AttrMap a = attrs({{"epsilon", 1e-3f}});
    if (std::string(layout) == "nhwc") a.set("layout", std::string(layout));
    b->node("batch_normalization", ins, a);
  }
  // lrn: odd and even window sizes.
  b->node("lrn", {b->input(f32, {2, 5, 3, 4})},
          attrs({{"size", int64_t{3}}, {"alpha", 0.5f}, {"beta", 0.75f}, {"bias", 1.0f}}));
  b->node("lrn", {b->input(f32, {1, 6, 7})},
          attrs({{"size", int64_t{2}}, {"alpha", 1e-4f}, {"beta", 0.6f}, {"bias", 2.0f}}));
  b->node("lrn", {b->input(f16, {1, 7, 9})},
          attrs({{"size", int64_t{5}}, {"alpha", 0.3f}, {"beta", 0.5f}, {"bias", 1.5f}}));
  // mean_variance_normalization: non-adjacent axes, one axis, f16 long rows.
  b->node("mean_variance_normalization", {b->input(f32, {2, 3, 4, 5})}, attrs({{"axes", I{0, 2, 3}}}));
  b->node("mean_variance_normalization", {b->input(f32, {3, 1, 7})}, attrs({{"axes", I{1, 2}}}));
  b->node("mean_variance_normalization", {b->input(f16, {3, 300})}, attrs({{"axes", I{1}}}));
  // lp_normalization.
  b->node("lp_normalization", {b->input(f32, {3, 4, 5})}, attrs({{"axis", int64_t{1}}, {"p", int64_t{1}}}));
  b->node("lp_normalization", {b->input(f32, {3, 4, 300})}, attrs({{"axis", int64_t{-1}}, {"p", int64_t{2}}}));
  b->node("lp_normalization", {b->input(f16, {2, 300})}, attrs({{"axis", int64_t{1}}, {"p", int64_t{2}}}));
  b->g.set_outputs(b->outs);
  return b;
}

TEST(CodegenNorm, EveryNormalizationCompilesAndMatchesReferenceOnSim) {
  auto b = all_cases();
  const Graph* g = &b->g;
  EXPECT_EQ(g->num_nodes(), 25u);
  for (const auto& n : g->nodes()) {
    const codegen::KernelEmitter* e = codegen::emitter_for(*n);
    ASSERT_NE(e, nullptr) << n->describe();
    EXPECT_STREQ(e->name, "normalization") << n->describe();
  }
  testing::expect_kernels_compile({g}, "codegen norm");
  // Seeded inputs; batch_normalization's variances made non-negative.
  auto feed = testing::random_inputs(*g, 11);
  for (auto& [name, t] : feed)
    if (name.rfind("var", 0) == 0)
      for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, std::fabs(t.get_double(i)));
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<Tensor> got = codegen::SimExecutor(*g).run(feed);
  ASSERT_EQ(got.size(), want.size());
  int checked = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    // (Layout tags aside: the reference's nhwc results carry one.)
    ASSERT_EQ(got[i].dtype(), want[i].dtype()) << "result " << i;
    ASSERT_EQ(got[i].shape(), want[i].shape()) << "result " << i;
    const DType t = want[i].dtype();
    const Tolerance tol = t == DType::F16 ? default_tolerance(t) : Tolerance{1e-5, 1e-4};
    const Value* v = g->outputs()[i];
    EXPECT_EQ(compare_tensors(got[i], want[i], tol), "") << v->producer()->describe() << " result " << i;
    ++checked;
  }
  EXPECT_EQ(checked, 28);
}

TEST(CodegenNorm, LaunchShapeAndErrors) {
  const OpDef& ln = op_registry().get("layer_normalization");
  AttrMap a;
  a.set("axis", int64_t{-1});
  auto k = codegen::emit_normalization(ln, a, {TensorType(DType::F32, {3, 5, 300}), TensorType(DType::F32, {300})},
                                       {TensorType(DType::F32, {3, 5, 300})});
  EXPECT_EQ(k.outputs, 15);
  EXPECT_EQ(k.count, 300);
  // Rows of <= 1024 elements: a warp per row, 4 rows per block where that
  // still gives a block to each of an H100's 132 SMs, else 2 or 1
  // (docs/codegen.md "Bandwidth-bound kernels"): 15 rows, 15 blocks of one warp.
  EXPECT_EQ(k.block, 32u);
  EXPECT_EQ(k.grid, 15u);
  auto small = codegen::emit_normalization(ln, a, {TensorType(DType::F32, {3, 7}), TensorType(DType::F32, {7})},
                                           {TensorType(DType::F32, {3, 7})});
  EXPECT_EQ(small.block, 32u);
  EXPECT_EQ(small.grid, 3u);
  auto ln_of = [&](int64_t rows) {
    return codegen::emit_normalization(ln, a, {TensorType(DType::F16, {rows, 768}), TensorType(DType::F16, {768})},
                                       {TensorType(DType::F16, {rows, 768})});
  };
  // BERT-base's layernorms at sequence 128: 128 blocks of one warp (4-warp blocks gave 32 SMs a block).
  EXPECT_EQ(ln_of(128).block, 32u);
  EXPECT_EQ(ln_of(128).grid, 128u);
  EXPECT_EQ(ln_of(264).block, 64u);  // 2 rows per block: 132 blocks
  EXPECT_EQ(ln_of(264).grid, 132u);
  EXPECT_EQ(ln_of(4096).block, 128u);  // 4 rows per block: 1024 blocks
  EXPECT_EQ(ln_of(4096).grid, 1024u);
  // Longer rows: a block per row, about 16 elements per thread.
  auto wide = codegen::emit_normalization(ln, a, {TensorType(DType::F32, {2, 5000}), TensorType(DType::F32, {5000})},
                                          {TensorType(DType::F32, {2, 5000})});
  EXPECT_EQ(wide.block, 512u);
  EXPECT_EQ(wide.grid, 2u);
  EXPECT_THROW(codegen::emit_normalization(op_registry().get("softmax"), a, {TensorType(DType::F32, {3, 7})},
                                           {TensorType(DType::F32, {3, 7})}),
               Error);
  EXPECT_THROW(codegen::emit_normalization(ln, a, {TensorType(DType::I32, {3, 7}), TensorType(DType::I32, {7})},
                                           {TensorType(DType::I32, {3, 7})}),
               Error);
}

}  // namespace
}  // namespace kiln
