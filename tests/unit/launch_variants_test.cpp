// Launch variants (docs/dynamic_shapes.md "Specialised launches",
// docs/plan_format.md section `launch variants`): a tensor-core GEMM with a
// symbolic batch compiled once with a profile whose opt shape is a small
// batch gets, besides its shape-generic launch, launches compiled for the opt
// shape (split-K, as a static plan of that shape takes), because the
// performance model finds them faster there. Plan-on-sim runs them at the
// opt shape and the generic launch at the others, equal to the reference
// backend at each; the section round-trips and the loader refuses a broken
// one. A GEMM whose rows span 1..2048 gets size buckets (generic kernels
// with tiles for fewer rows) that run for their ranges of rows. A pointwise
// graph, where specialising gains nothing, gets none.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "runtime/plan_graph.h"
#include "runtime/plan_launch_variants.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

// M = b rows against a 2048 x 256 weight: at b = 2 the shape-generic tile
// (chosen for thousands of rows, unsplit) leaves most SMs idle; the static
// tile for 2 rows splits K (its 32 k-tiles of 64 are a long wait unsplit).
const char* kGemm =
    "graph @m(%x: f16[b,2048], %w: f16[2048,256]) -> (f16[b,256]) symbols(b in [1, 64]) {\n"
    "  %y = matmul(%x, %w) : f16[b,256]\n"
    "  %r = relu(%y) : f16[b,256]\n"
    "  return %r\n"
    "}\n";

std::unique_ptr<Graph> compiled(const char* text, const std::string& target) {
  auto g = parse_graph(text, "gemm.kir");
  CompileOptions o;
  o.pass.target = target;
  o.symbolic = true;
  compile_graph(*g, o);
  return g;
}

plan::Plan gemm_plan(const Graph& g, const std::string& arch) {
  PlanBuildOptions po{arch, "fp16", {}};
  po.profiles = {{{{"x", {1, 2048}, {2, 2048}, {64, 2048}}}}};
  po.source_name = "gemm.onnx";
  return build_plan(g, po);
}

std::set<std::string> variant_kernels(const plan::Plan& p, plan::VariantKind kind) {
  std::set<std::string> names;
  for (const plan::LaunchVariant& v : p.launch_variants)
    if (v.kind == kind)
      for (const plan::Step& s : v.steps) names.insert(p.kernels.at(s.kernel).name);
  return names;
}

std::vector<const plan::LaunchVariant*> of_kind(const plan::Plan& p, plan::VariantKind kind) {
  std::vector<const plan::LaunchVariant*> vs;
  for (const plan::LaunchVariant& v : p.launch_variants)
    if (v.kind == kind) vs.push_back(&v);
  return vs;
}

TEST(LaunchVariants, GemmAtTheOptShapeGetsSplitKLaunchesForSm80AndSm90) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kGemm, arch);
    plan::Plan p = gemm_plan(*g, arch);
    ASSERT_TRUE(p.meta.gpu_kernels) << arch << ": " << p.meta.no_gpu_reason;
    ASSERT_EQ(of_kind(p, plan::VariantKind::OptShape).size(), 1u) << arch;
    const plan::LaunchVariant& v = *of_kind(p, plan::VariantKind::OptShape)[0];
    EXPECT_EQ(v.kind, plan::VariantKind::OptShape);
    EXPECT_EQ(v.profile, 0u);
    ASSERT_EQ(v.when.size(), 1u);
    EXPECT_EQ(plan::condition_text(v.when[0]), "b=2");
    EXPECT_EQ(plan::variant_text(v), "the opt shape of profile 0 (b=2)");
    EXPECT_TRUE(v.generic.empty()) << "the opt shape's launches are static";
    // Compiled by NVRTC for the target like every other kernel, with the
    // split the static path takes at 2 rows.
    bool split = false;
    for (const plan::Step& s : v.steps) {
      const plan::Kernel& k = p.kernels.at(s.kernel);
      EXPECT_FALSE(k.cubin.empty()) << k.name << " has no " << arch << " CUBIN";
      EXPECT_EQ(k.source.find("kiln_syms ks"), std::string::npos) << k.name << " is shape-generic";
      split |= k.source.find("split") != std::string::npos;
    }
    EXPECT_TRUE(split) << arch << ": the opt shape's GEMM does not split K";
    std::vector<uint8_t> bytes = plan::serialize(p);
    plan::Plan back = plan::deserialize(bytes.data(), bytes.size(), "gemm.plan");
    ASSERT_EQ(back.launch_variants.size(), p.launch_variants.size());
    for (size_t i = 0; i < p.launch_variants.size(); ++i) {
      EXPECT_EQ(back.launch_variants[i].when, p.launch_variants[i].when);
      EXPECT_EQ(back.launch_variants[i].first, p.launch_variants[i].first);
      EXPECT_EQ(back.launch_variants[i].steps.size(), p.launch_variants[i].steps.size());
      EXPECT_EQ(back.launch_variants[i].generic, p.launch_variants[i].generic);
    }
    plan::load_graph(back, "gemm.plan");  // the checks against the graph pass
  }
}

TEST(LaunchVariants, PlanOnSimRunsTheOptShapesLaunchesThereAndTheGenericOnesElsewhere) {
  auto g = compiled(kGemm, "sm_90");
  plan::Plan p = gemm_plan(*g, "sm_90");
  ASSERT_FALSE(p.launch_variants.empty());
  const std::set<std::string> specialised = variant_kernels(p, plan::VariantKind::OptShape);
  for (int64_t b : {1, 2, 37}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"b", b}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(b));
    std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    std::vector<std::string> ran;
    std::vector<Tensor> got = run_plan_on_sim(p, *g, feed, {}, &ran);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(compare_tensors(got[0], want[0], {2e-2, 2e-2}), "") << "b=" << b;
    const size_t from_variants =
        std::count_if(ran.begin(), ran.end(), [&](const std::string& k) { return specialised.count(k) > 0; });
    if (b == 2) {
      EXPECT_EQ(from_variants, ran.size()) << "b=2 (the opt shape) ran a shape-generic launch";
    } else {
      EXPECT_EQ(from_variants, 0u) << "b=" << b << " ran a launch specialised for b=2";
      EXPECT_FALSE(ran.empty());
    }
    // The runtime's choice is the same function of the shape.
    const std::vector<plan::ActiveStep> active = plan::launches_at(p, {{"b", b}});
    EXPECT_EQ(std::any_of(active.begin(), active.end(),
                          [&](const plan::ActiveStep& a) {
                            return a.variant >= 0 && p.launch_variants[a.variant].kind == plan::VariantKind::OptShape;
                          }),
              b == 2);
  }
}

// Rows from 1 to 2048: the default generic tile (chosen for thousands of
// rows) against tiles for fewer rows, per range of rows (GEMM size buckets).
const char* kWideGemm =
    "graph @m(%x: f16[b,768], %w: f16[768,768]) -> (f16[b,768]) symbols(b in [1, 2048]) {\n"
    "  %y = matmul(%x, %w) : f16[b,768]\n"
    "  return %y\n"
    "}\n";

TEST(LaunchVariants, GemmSizeBucketsRunTheirTilesForTheirRowsOnSim) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kWideGemm, arch);
    PlanBuildOptions po{arch, "fp16", {}};
    po.profiles = {{{{"x", {1, 768}, {2048, 768}, {2048, 768}}}}};
    plan::Plan p = build_plan(*g, po);
    const std::vector<const plan::LaunchVariant*> buckets = of_kind(p, plan::VariantKind::Bucket);
    ASSERT_FALSE(buckets.empty()) << arch << ": no GEMM size bucket";
    EXPECT_LE(buckets.size(), 3u);
    int64_t next_lo = 1;
    for (const plan::LaunchVariant* v : buckets) {
      ASSERT_EQ(v->when.size(), 1u);
      EXPECT_EQ(dim_str(dim_of_poly(v->when[0].expr)), "b");
      EXPECT_GE(v->when[0].lo, next_lo) << "buckets overlap";
      next_lo = v->when[0].hi + 1;
      EXPECT_FALSE(v->generic.empty()) << "a bucket's launches are shape-generic";
      for (const plan::Step& s : v->steps)
        EXPECT_FALSE(p.kernels.at(s.kernel).cubin.empty()) << p.kernels.at(s.kernel).name << " has no CUBIN";
    }
    if (arch != "sm_90") continue;
    // On sim: the smallest row count of each bucket (at most 300 rows) runs
    // that bucket's kernels, equal to the reference.
    int ran_buckets = 0;
    for (const plan::LaunchVariant* v : buckets) {
      const int64_t b = v->when[0].lo;
      if (b > 300) continue;
      ++ran_buckets;
      std::set<std::string> mine;
      for (const plan::Step& s : v->steps) mine.insert(p.kernels.at(s.kernel).name);
      std::unique_ptr<Graph> at = specialize_graph(*g, {{"b", b}}, op_registry());
      const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(b));
      std::vector<std::string> ran;
      std::vector<Tensor> got = run_plan_on_sim(p, *g, feed, {}, &ran);
      EXPECT_EQ(compare_tensors(got[0], ReferenceExecutor(*at).run(feed)[0], {2e-2, 2e-2}), "") << "b=" << b;
      ASSERT_FALSE(ran.empty());
      for (const std::string& k : ran) EXPECT_TRUE(mine.count(k)) << "b=" << b << " ran " << k;
      EXPECT_EQ(plan::variant_text(*v), fmt::format("bucket {} <= b <= {}", v->when[0].lo, v->when[0].hi));
    }
    EXPECT_GE(ran_buckets, 1) << "no bucket starts at 300 rows or fewer";
    // --opt-variants none: no buckets either.
    po.opt_variants = "none";
    EXPECT_TRUE(build_plan(*g, po).launch_variants.empty());
  }
}

// A channels-last f16 conv over a symbolic batch and image size: its
// implicit GEMM's rows, n*h*w, span 4..32768, so the tiles chosen for fewer
// rows win a range (size buckets over the polynomial); plan-on-sim runs a
// bucket's kernels for shapes in it, equal to the reference.
TEST(LaunchVariants, NhwcConvOverASymbolicImageGetsSizeBucketsOnSim) {
  const char* conv =
      "graph @m(%x: f16[n,h,w,256]{nhwc}, %w: f16[512,3,3,256]{nhwc}) -> (f16[n,h,w,512]{nhwc}) "
      "symbols(n in [1, 8], h in [2, 64], w in [2, 64]) {\n"
      "  %y = conv(%x, %w) {dilations=[1,1], group=1, layout=\"nhwc\", pads=[1,1,1,1], strides=[1,1]} : "
      "f16[n,h,w,512]{nhwc}\n"
      "  %r = relu(%y) : f16[n,h,w,512]{nhwc}\n"
      "  return %r\n"
      "}\n";
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(conv, arch);
    PlanBuildOptions po{arch, "fp16", {}};
    po.profiles = {{{{"x", {1, 2, 2, 256}, {8, 64, 64, 256}, {8, 64, 64, 256}}}}};
    plan::Plan p = build_plan(*g, po);
    const std::vector<const plan::LaunchVariant*> buckets = of_kind(p, plan::VariantKind::Bucket);
    ASSERT_FALSE(buckets.empty()) << arch << ": no conv size bucket";
    EXPECT_LE(buckets.size(), 3u);
    for (const plan::LaunchVariant* v : buckets) {
      ASSERT_EQ(v->when.size(), 1u);
      EXPECT_EQ(dim_str(dim_of_poly(v->when[0].expr)), "h*n*w");
      EXPECT_FALSE(v->generic.empty()) << "a bucket's launches are shape-generic";
      for (const plan::Step& s : v->steps) {
        EXPECT_FALSE(p.kernels.at(s.kernel).cubin.empty()) << p.kernels.at(s.kernel).name << " has no CUBIN";
        EXPECT_EQ(p.kernels.at(s.kernel).name.find("kiln_conv_nhwc"), 0u) << p.kernels.at(s.kernel).name;
      }
    }
    if (arch != "sm_90") continue;
    int ran_buckets = 0;
    for (auto [n, h, w] : {std::tuple<int64_t, int64_t, int64_t>{1, 2, 2}, {1, 5, 3}, {2, 7, 9}, {1, 16, 13}}) {
      const int64_t rows = n * h * w;
      const plan::LaunchVariant* in = nullptr;
      for (const plan::LaunchVariant* v : buckets)
        if (v->when[0].lo <= rows && rows <= v->when[0].hi) in = v;
      std::set<std::string> mine;
      if (in)
        for (const plan::Step& s : in->steps) mine.insert(p.kernels.at(s.kernel).name);
      std::unique_ptr<Graph> at = specialize_graph(*g, {{"n", n}, {"h", h}, {"w", w}}, op_registry());
      const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(rows));
      std::vector<std::string> ran;
      std::vector<Tensor> got = run_plan_on_sim(p, *g, feed, {}, &ran);
      EXPECT_EQ(compare_tensors(got[0], ReferenceExecutor(*at).run(feed)[0], {2.5e-3, 1e-3}), "") << "rows " << rows;
      if (!in) continue;
      ++ran_buckets;
      for (const std::string& k : ran) EXPECT_TRUE(mine.count(k)) << "rows " << rows << " ran " << k;
    }
    EXPECT_GE(ran_buckets, 1) << "no bucket holds 4..208 rows";
  }
}

TEST(LaunchVariants, PointwiseGraphGetsNone) {
  auto g = compiled(
      "graph @m(%x: f32[b,3,24]) -> (f32[b,3,24]) symbols(b in [1, 16]) {\n"
      "  %t = tanh(%x) : f32[b,3,24]\n  return %t\n}\n",
      "sm_90");
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {{{{"x", {1, 3, 24}, {4, 3, 24}, {16, 3, 24}}}}};
  plan::Plan p = build_plan(*g, po);
  ASSERT_FALSE(p.generic_launches.empty());
  EXPECT_TRUE(p.launch_variants.empty()) << "a pointwise kernel gains nothing from static sizes";
}

TEST(LaunchVariants, LoaderRefusesABrokenSection) {
  auto g = compiled(kGemm, "sm_90");
  plan::Plan p = gemm_plan(*g, "sm_90");
  ASSERT_FALSE(p.launch_variants.empty());
  auto error_of = [&](const plan::Plan& broken) {
    std::vector<uint8_t> bytes = plan::serialize(broken);
    try {
      plan::Plan back = plan::deserialize(bytes.data(), bytes.size(), "gemm.plan");
      plan::load_graph(back, "gemm.plan");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  plan::Plan past_end = p;
  past_end.launch_variants[0].first = static_cast<uint32_t>(p.steps.size());
  EXPECT_NE(error_of(past_end).find("launch variant 0 replaces steps"), std::string::npos) << error_of(past_end);
  plan::Plan undeclared = p;
  undeclared.launch_variants[0].when[0].expr = DimPoly{{DimMonomial{"zz"}, 1}};
  EXPECT_NE(error_of(undeclared).find("undeclared symbol zz"), std::string::npos) << error_of(undeclared);
  plan::Plan bad_kernel = p;
  bad_kernel.launch_variants[0].steps[0].kernel = static_cast<uint32_t>(p.kernels.size());
  EXPECT_NE(error_of(bad_kernel).find("names kernel"), std::string::npos) << error_of(bad_kernel);
}

}  // namespace
}  // namespace kiln
