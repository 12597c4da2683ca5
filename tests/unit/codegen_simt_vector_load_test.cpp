// The SIMT GEMM/conv kernel's 128-bit operand loads (codegen/emitters/gemm_conv/emit_gemm.cpp):
// an f32 operand whose 16-byte chunks are proven (K, N or the channels per
// group a multiple of 4) is staged one chunk per ld.global.v4 where its
// buffer is 16-byte aligned, element by element where it is not (a run-time
// test: views and graph inputs may start anywhere). Both paths match the
// reference on the simulator; the vector loads are in the sm_80 and sm_90 PTX.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "backends/compare.h"
#include "backends/reference/executor.h"
#include "backends/sim/sim_module.h"
#include "codegen/emitter_table.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "codegen_compute_util.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace kiln {
namespace {

struct Case {
  const char* name;
  const char* text;  // one node
  bool vector;       // whether its kernel takes 128-bit loads
};

const Case kCases[] = {
    // A [M, K] rows along k, B [K, N] rows along n.
    {"matmul", R"(graph @m(%a: f32[37,64], %b: f32[64,52]) -> (f32[37,52]) {
  %y = matmul(%a, %b) : f32[37,52]
  return %y
})",
     true},
    // Batched, B broadcast; ragged M, K a multiple of 4, N not (A vectorized, B not).
    {"batched matmul", R"(graph @m(%a: f32[3,21,40], %b: f32[40,30]) -> (f32[3,21,30]) {
  %y = matmul(%a, %b) : f32[3,21,30]
  return %y
})",
     true},
    // NCHW conv: weight rows of K = C x taps along k.
    {"conv nchw", R"(graph @c(%x: f32[2,8,9,9], %w: f32[12,8,3,3], %b: f32[12]) -> (f32[2,12,9,9]) {
  %y = conv(%x, %w, %b) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} : f32[2,12,9,9]
  return %y
})",
     true},
    // nhwc conv: im2col chunks of 4 channels inside one tap, padding zero-filled.
    {"conv nhwc", R"(graph @c(%x: f32[2,7,7,8], %w: f32[16,3,3,8]) -> (f32[2,4,4,16]) {
  %y = conv(%x, %w) {dilations=[1,1], group=1, layout="nhwc", pads=[1,1,1,1], strides=[2,2]} : f32[2,4,4,16]
  return %y
})",
     true},
    // A MobileNetV2-like 1x1 nhwc conv with bias and relu (tile 32x32).
    {"conv nhwc 1x1", R"(graph @c(%x: f32[1,14,14,192], %w: f32[64,1,1,192], %b: f32[64]) -> (f32[1,14,14,64]) {
  %y = fused(%x, %w, %b) {kind="conv_epilogue"} : f32[1,14,14,64] {
    graph @fused_0(%x: f32[1,14,14,192], %w: f32[64,1,1,192], %b: f32[64]) -> (f32[1,14,14,64]) {
      %c = conv(%x, %w, %b) {dilations=[1,1], group=1, layout="nhwc", pads=[0,0,0,0], strides=[1,1]} : f32[1,14,14,64]
      %y = relu(%c) : f32[1,14,14,64]
      return %y
    }
  }
  return %y
})",
     true},
    // K = 27: no chunk is proven, element by element only.
    {"unaligned K", R"(graph @m(%a: f32[20,27], %b: f32[27,9]) -> (f32[20,9]) {
  %y = matmul(%a, %b) : f32[20,9]
  return %y
})",
     false},
};

std::map<std::string, Tensor> inputs_for(const Graph& g, uint64_t seed) {
  std::map<std::string, Tensor> feed;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (Value* in : g.inputs()) {
    Tensor t(in->type());
    for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, normal(rng));
    feed[in->name()] = std::move(t);
  }
  return feed;
}

// Runs the one node's kernels on the simulator; with `shift`, every operand
// is passed one element past a 16-byte boundary (a view's offset).
Tensor run_on_sim(const Node& n, const std::vector<codegen::NodeKernel>& ks,
                  const std::map<std::string, codegen::SimEntry>& entries, const std::map<std::string, Tensor>& feed,
                  bool shift) {
  Tensor out(n.output(0)->type());
  std::vector<std::vector<float>> copies;  // shifted operand storage
  for (const codegen::NodeKernel& k : ks) {
    std::vector<void*> bufs{out.raw()};
    std::vector<long long> counts{out.numel()};
    copies.clear();
    copies.reserve(n.num_inputs());
    for (Value* v : n.inputs()) {
      const Tensor& t = feed.at(v->name());
      if (!shift) {
        bufs.push_back(const_cast<void*>(t.raw()));
        EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 16, 0u) << "the aligned run must take the 128-bit path";
      } else {
        std::vector<float>& c = copies.emplace_back(t.numel() + 4);
        const float* src = static_cast<const float*>(t.raw());
        std::copy(src, src + t.numel(), c.begin() + 1);
        bufs.push_back(c.data() + 1);
        EXPECT_NE(reinterpret_cast<uintptr_t>(c.data() + 1) % 16, 0u);
      }
      counts.push_back(t.numel());
    }
    for (const Tensor& t : k.extra) {
      bufs.push_back(const_cast<void*>(t.raw()));
      counts.push_back(t.numel());
    }
    sim::LaunchConfig cfg;
    cfg.kernel = k.name;
    cfg.grid = dim3(k.grid.x, k.grid.y, k.grid.z);
    cfg.block = dim3(k.block.x, k.block.y, k.block.z);
    cfg.shared_bytes = k.shared_bytes;
    codegen::sim_launch(entries.at(k.name), cfg, bufs, counts);
  }
  return out;
}

int count(const std::string& s, const std::regex& re) {
  return static_cast<int>(std::distance(std::sregex_iterator(s.begin(), s.end(), re), std::sregex_iterator()));
}

TEST(CodegenSimtVectorLoads, F32OperandsLoad16BytesWhereAlignedAndMatchTheReferenceEitherWay) {
  const std::regex vec_load(R"(ld\.global(\.nc)?\.v4\.f32)");
  codegen::KernelCache cache;
  int vector_kernels = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    auto g = parse_graph(c.text, "test.kir");
    ASSERT_NO_THROW(verify_graph(*g, op_registry()));
    const Node& n = *g->nodes().front();
    const std::vector<codegen::NodeKernel> ks = codegen::emitter_for(n)->emit(n);
    ASSERT_EQ(ks.size(), 1u);
    ASSERT_NE(ks[0].source.find("tile"), std::string::npos);
    EXPECT_EQ(ks[0].source.find("mma"), std::string::npos) << "not the SIMT kernel";
    const bool has_vec = ks[0].source.find("KILN_PTR_CAST(const kiln_f32x4") != std::string::npos;
    EXPECT_EQ(has_vec, c.vector);
    vector_kernels += has_vec;
    for (const char* arch : {"sm_80", "sm_90"}) {
      codegen::KernelCompiler compiler(arch, &cache);
      std::vector<codegen::CompiledKernel> compiled;
      ASSERT_NO_THROW(compiled = compiler.compile({{ks[0].name, ks[0].source}}));
      EXPECT_EQ(compiled.at(0).spill_bytes, 0) << arch;
      EXPECT_EQ(count(compiled.at(0).ptx, vec_load) > 0, c.vector) << arch;
    }
    codegen::SimCompiler sim;
    const auto entries = sim.compile({{ks[0].name, ks[0].source}});
    const auto feed = inputs_for(*g, 7);
    const Tensor want = ReferenceExecutor(*g).run(feed).at(0);
    for (bool shift : {false, true}) {
      Tensor got;
      ASSERT_NO_THROW(got = run_on_sim(n, ks, entries, feed, shift)) << (shift ? "shifted" : "aligned");
      EXPECT_EQ(compare_tensors(got, want, testing::tolerance_for(DType::F32)), "")
          << (shift ? "operands off 16 bytes (element-wise path)" : "aligned operands (128-bit path)");
    }
  }
  EXPECT_EQ(vector_kernels, 5);
}

}  // namespace
}  // namespace kiln
