// Plans are launchable by construction (codegen/launch_fit.h): every kernel
// carries __launch_bounds__(its block), and a launch the GPU would refuse is
// an error naming the model file, node and limit, never a plan.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "backends/reference/executor.h"
#include "codegen/emitter_table.h"
#include "codegen/kernel_build.h"
#include "codegen/launch_fit.h"
#include "runtime/plan_format.h"
#include "compiler/targets.h"
#include "ir/error.h"
#include "runtime/plan_graph.h"
#include "tests/unit/plan_test_util.h"
#include "backends/compare.h"
#include "backends/plan_sim.h"

namespace kiln {
namespace {

// A graph concatenating `n` one-element inputs.
std::string concat_text(int n) {
  std::string params, args;
  for (int i = 0; i < n; ++i) {
    params += fmt::format("{}%x{}: f32[1]", i ? ", " : "", i);
    args += fmt::format("{}%x{}", i ? ", " : "", i);
  }
  return fmt::format("graph @m({}) -> (f32[{}]) {{\n  %cat = concat({}) {{axis=0}} : f32[{}]\n  return %cat\n}}",
                     params, n, args, n);
}

// Registers a block of `threads` needs on sm_80/sm_90: per warp, regs x 32
// rounded up to 256 (written out here, not taken from launch_fit).
long long block_registers(long long threads, int regs) { return (threads + 31) / 32 * ((regs * 32 + 255) / 256 * 256); }

// The issue's case: without a launch bound, ptxas gives this softmax 94
// registers per thread at 1024 threads per block (96,256 > 65,536:
// CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES on an H100). With the bound it fits, and
// the plan still computes the softmax.
TEST(LaunchFit, SoftmaxOver32768F64FitsAnH100Block) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  auto g = testing::compile_text(R"(graph @m(%x: f64[1,32768]) -> (f64[1,32768]) {
    %y = softmax(%x) {axis=-1} : f64[1,32768]
    return %y
  })",
                                 "sm_90");
  plan::Plan p = build_plan(*g, {"sm_90", "fp32", {}});
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  unsigned long long widest = 0;
  for (const plan::Step& s : p.steps) {
    if (s.kind != plan::StepKind::Kernel) continue;
    const plan::Kernel& k = p.kernels[s.kernel];
    const long long threads = 1ll * s.block.x * s.block.y * s.block.z;
    widest = std::max<unsigned long long>(widest, threads);
    EXPECT_NE(k.source.find(fmt::format("__launch_bounds__({})", threads)), std::string::npos) << k.name;
    ASSERT_GT(k.registers, 0) << k.name;
    EXPECT_LE(block_registers(threads, k.registers), 65536)
        << k.name << ": " << threads << " threads x " << k.registers << " registers";
  }
  EXPECT_EQ(widest, 1024u) << "the softmax no longer runs 1024-thread blocks: pick a case that does";
  auto feed = testing::random_inputs(*g, 5);
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<Tensor> got = run_plan_on_sim(p, *plan::load_graph(p), feed);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(compare_tensors(got[0], want[0], {1e-12, 1e-10}), "");
}

// The one thread cap (codegen::block_threads, compiler/plan_writer.h): on an
// sm_90 with a quarter of the H100's register file, the softmax's
// 1024-thread blocks (64 registers each under their bound: 65,536) misfit
// after NVRTC; the plan builder emits the node again with fewer threads
// until its launches fit, and the plan still computes the softmax.
TEST(LaunchFit, AMisfitAfterNvrtcIsEmittedAgainWithFewerThreads) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  auto g = testing::compile_text(R"(graph @m(%x: f64[1,32768]) -> (f64[1,32768]) {
    %y = softmax(%x) {axis=-1} : f64[1,32768]
    return %y
  })",
                                 "sm_90");
  codegen::ArchLimits small = codegen::arch_limits("sm_90");
  small.registers_per_block = 16384;
  codegen::ScopedArchLimits scoped(small);
  plan::Plan p = build_plan(*g, {"sm_90", "fp32", {}});
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  int launches = 0;
  for (const plan::Step& s : p.steps) {
    if (s.kind != plan::StepKind::Kernel) continue;
    ++launches;
    const plan::Kernel& k = p.kernels[s.kernel];
    const long long threads = 1ll * s.block.x * s.block.y * s.block.z;
    EXPECT_LT(threads, 1024) << k.name;
    EXPECT_NE(k.source.find(fmt::format("__launch_bounds__({})", threads)), std::string::npos) << k.name;
    ASSERT_GT(k.registers, 0) << k.name;
    EXPECT_LE(block_registers(threads, k.registers), 16384)
        << k.name << ": " << threads << " threads x " << k.registers << " registers";
  }
  EXPECT_GT(launches, 0);
  auto feed = testing::random_inputs(*g, 5);
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<Tensor> got = run_plan_on_sim(p, *plan::load_graph(p), feed);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(compare_tensors(got[0], want[0], {1e-12, 1e-10}), "");
}

// What no variant fits is refused, naming the model file, the node, the
// kernel and the limit: a register file smaller than one warp's registers
// (fewer threads cannot help, so no variant is tried).
TEST(LaunchFit, WhatNoVariantFitsIsRefusedNamingFileNodeAndLimit) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  auto g = testing::compile_text(R"(graph @m(%x: f32[64,256]) -> (f32[64,256]) {
    %y = softmax(%x) {axis=-1} : f32[64,256]
    return %y
  })",
                                 "sm_90");
  codegen::ArchLimits tiny = codegen::arch_limits("sm_90");
  tiny.registers_per_block = 128;  // less than one warp of one register (256)
  codegen::ScopedArchLimits scoped(tiny);
  try {
    build_plan(*g, {"sm_90", "fp32", {}, true, {}, "tiny.onnx"});
    FAIL() << "a plan was written for a register file no block fits";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("tiny.onnx: ", 0), 0u) << m;
    EXPECT_NE(m.find("softmax"), std::string::npos) << m;
    EXPECT_NE(m.find(": kernel "), std::string::npos) << m;
    EXPECT_NE(m.find("exceed sm_90's 128 registers per block"), std::string::npos) << m;
  }
}

// A plan built on an sm_90 whose register file holds `registers` per block.
plan::Plan plan_with_register_file(const Graph& g, long long registers) {
  codegen::ArchLimits small = codegen::arch_limits("sm_90");
  small.registers_per_block = registers;
  codegen::ScopedArchLimits scoped(small);
  return build_plan(g, {"sm_90", "fp32", {}, true, {}, "small.onnx"});
}

// Another variant: the tiled transpose's block is fixed by its 32 x 8 tile;
// under a cap below it the generic injective kernel, whose block follows the
// cap, takes the transpose (2,048 registers per block: one warp of up to 64).
TEST(LaunchFit, UnderACapTheTiledTransposeGivesWayToTheGenericKernel) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  auto g = testing::compile_text(R"(graph @m(%x: f32[64,96]) -> (f32[96,64]) {
    %y = transpose(%x) {perm=[1,0]} : f32[96,64]
    return %y
  })",
                                 "sm_90");
  plan::Plan h100 = build_plan(*g, {"sm_90", "fp32", {}});
  ASSERT_EQ(h100.kernels.size(), 1u);
  ASSERT_NE(h100.kernels[0].name.find("tiled"), std::string::npos)
      << "no longer the tiled transpose: pick another case";
  plan::Plan p = plan_with_register_file(*g, 2048);
  ASSERT_EQ(p.kernels.size(), 1u);
  const plan::Step& s = p.steps.at(0);
  const long long threads = 1ll * s.block.x * s.block.y * s.block.z;
  EXPECT_EQ(p.kernels[0].name.find("tiled"), std::string::npos) << p.kernels[0].name;
  EXPECT_LE(block_registers(threads, p.kernels[0].registers), 2048) << threads << " x " << p.kernels[0].registers;
  auto feed = testing::random_inputs(*g, 3);
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<Tensor> got = run_plan_on_sim(p, *plan::load_graph(p), feed);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(compare_tensors(got[0], want[0], {0, 0}), "");
}

// An emitter whose block is fixed by its tiling (the GEMM's) has no variant
// with fewer threads: its misfit is refused, naming the file, node and limit.
TEST(LaunchFit, AnEmitterThatKeepsItsBlockIsRefused) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  auto g = testing::compile_text(R"(graph @m(%a: f32[64,64], %b: f32[64,64]) -> (f32[64,64]) {
    %y = matmul(%a, %b) : f32[64,64]
    return %y
  })",
                                 "sm_90");
  try {
    plan_with_register_file(*g, 2048);
    FAIL() << "a GEMM block fit 2,048 registers";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("small.onnx: ", 0), 0u) << m;
    EXPECT_NE(m.find("matmul"), std::string::npos) << m;
    EXPECT_NE(m.find("exceed sm_90's 2048 registers per block"), std::string::npos) << m;
    EXPECT_NE(m.find("threads per block: it has no variant with fewer)"), std::string::npos) << m;
  }
}

// 5,000 inputs and the output are 40,008 bytes of buffer pointers, over the
// 32,764 bytes of parameters the driver takes: the kernel takes one pointer
// to a table of them in device memory instead (codegen/param_table.h), NVRTC
// compiles it, and the plan computes the concatenation on the simulator.
// (Before the table this was an error naming the file, node and limit.)
TEST(LaunchFit, ConcatOf5000InputsTakesAPointerTable) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  auto g = testing::parse(concat_text(5000));
  CompileOptions o;
  o.pass.target = "sm_90";
  o.passes = {"plan-memory"};
  compile_graph(*g, o);
  plan::Plan p = build_plan(*g, {"sm_90", "fp32", {}, true, {}, "wide.onnx"});
  ASSERT_EQ(p.steps.size(), 1u);
  const plan::Step& s = p.steps[0];
  EXPECT_TRUE(s.param_table);
  EXPECT_EQ(s.args.size(), 5001u);
  const plan::Kernel& k = p.kernels.at(s.kernel);
  EXPECT_EQ(codegen::kernel_param_count(k.source, k.name), 1) << "the table is the kernel's one parameter";
  EXPECT_FALSE(k.cubin.empty());
  // Back from the plan file: the step still takes its table.
  std::vector<uint8_t> bytes = plan::serialize(p);
  plan::Plan q = plan::deserialize(bytes.data(), bytes.size(), "wide.plan");
  EXPECT_TRUE(q.steps.at(0).param_table);
  auto feed = testing::random_inputs(*g, 3);
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<Tensor> got = run_plan_on_sim(q, *plan::load_graph(q), feed);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(compare_tensors(got[0], want[0], {0, 0}), "");
}

// A kernel whose buffers fit keeps its parameters: the table is only for
// the kernels that need it, so every other plan stays byte-identical.
TEST(LaunchFit, AKernelWhoseBuffersFitTakesNoTable) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  auto g = testing::parse(concat_text(4094));  // 4,095 pointers: 32,760 bytes
  CompileOptions o;
  o.pass.target = "sm_90";
  o.passes = {"plan-memory"};
  compile_graph(*g, o);
  codegen::GraphKernels gk = codegen::build_graph_kernels(*g, {}, false);
  ASSERT_EQ(gk.launches.size(), 1u);
  const codegen::NodeKernel& k = gk.launches[0].kernels.at(0);
  EXPECT_FALSE(k.param_table);
  EXPECT_EQ(codegen::kernel_param_count(k.source, k.name), 4095);
}

// An sm_80 plan's CUBIN also runs on sm_86 and sm_89, whose opt-in shared
// memory is 99 KB, not sm_80's 163 KB, and its PTX on sm_90: each launch must
// fit every arch the plan runs on, not only the target's. A launch asking
// for 120 KB of dynamic shared memory fits sm_80 and sm_90, not sm_86. (No
// emitter asks for that much today: the kernels are given to the builder
// with its shared memory raised, their compiled forms stood in for.)
TEST(LaunchFit, ALaunchFitsEveryArchThePlansCodeRunsOn) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  EXPECT_EQ(archs_running_target("sm_80"), (std::vector<std::string>{"sm_80", "sm_86", "sm_89", "sm_90"}));
  EXPECT_EQ(archs_running_target("sm_89"), (std::vector<std::string>{"sm_89", "sm_90"}));
  EXPECT_EQ(archs_running_target("sm_90"), (std::vector<std::string>{"sm_90"}));
  EXPECT_EQ(archs_running_target("portable"), (std::vector<std::string>{"sm_80", "sm_86", "sm_89", "sm_90"}));
  EXPECT_TRUE(archs_running_target("cpu").empty());
  auto g = testing::compile_text(R"(graph @m(%x: f32[256]) -> (f32[256]) {
    %y = relu(%x) : f32[256]
    return %y
  })",
                                 "sm_80");
  auto kernels_for = [&](const std::string& arch) {
    codegen::GraphKernels gk;
    for (const auto& n : g->nodes()) {
      if (codegen::is_view_node(*n)) continue;
      codegen::NodeLaunches nl{n.get(), codegen::emitter_for(*n)->emit(*n)};
      for (codegen::NodeKernel& k : nl.kernels) {
        k.shared_bytes = 120 * 1024;
        codegen::CompiledKernel ck;
        ck.name = k.name;
        ck.arch = arch;
        ck.registers = 16;
        ck.shared_bytes = 0;
        gk.compiled.push_back(ck);
      }
      gk.launches.push_back(std::move(nl));
    }
    return gk;
  };
  const codegen::GraphKernels sm90 = kernels_for("sm_90"), sm80 = kernels_for("sm_80");
  EXPECT_NO_THROW(build_plan(*g, {"sm_90", "fp32", {}, true, {}, "m.onnx", &sm90}));
  try {
    build_plan(*g, {"sm_80", "fp32", {}, true, {}, "m.onnx", &sm80});
    FAIL() << "an sm_80 plan whose launch does not fit sm_86";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be launched on sm_86 (a sm_80 plan runs there too): 0 static + "
                                         "122880 dynamic bytes of shared memory, over sm_86's 101376 bytes per block "
                                         "(with the opt-in)"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("m.onnx: node ", 0), 0u) << e.what();
  }
}

TEST(LaunchFit, EachLimitNamesItsFigures) {
  const codegen::ArchLimits& h100 = codegen::arch_limits("sm_90");
  codegen::LaunchShape l;
  l.grid = {4};
  l.block = {1024};
  l.registers = 94;
  EXPECT_EQ(codegen::launch_misfit(l, h100),
            "1024 threads x 94 registers (32 warps x 3072 registers allocated per warp = 98304) exceed sm_90's 65536 "
            "registers per block");
  l.registers = 64;
  EXPECT_EQ(codegen::launch_misfit(l, h100), "");
  l.block = {2048};
  EXPECT_EQ(codegen::launch_misfit(l, h100), "block 2048 x 1 x 1 has 2048 threads in x, sm_90 allows 1..1024");
  l.block = {32, 32, 2};
  EXPECT_EQ(codegen::launch_misfit(l, h100), "block 32 x 32 x 2 has 2048 threads, over sm_90's 1024 threads per block");
  l.block = {256};
  l.bounded_threads = 128;
  EXPECT_EQ(codegen::launch_misfit(l, h100), "block of 256 threads, over the kernel's __launch_bounds__(128)");
  l.bounded_threads = -1;
  l.grid = {1, 70000};
  EXPECT_EQ(codegen::launch_misfit(l, h100), "grid 1 x 70000 x 1 has 70000 blocks in y, sm_90 allows 1..65535");
  l.grid = {1};
  l.static_shared = 40 * 1024;
  l.dynamic_shared = 160 * 1024;
  EXPECT_EQ(codegen::launch_misfit(l, h100), "");
  EXPECT_EQ(codegen::launch_misfit(l, codegen::arch_limits("sm_80")),
            "40960 static + 163840 dynamic bytes of shared memory, over sm_80's 166912 bytes per block (with the "
            "opt-in)");
  l.dynamic_shared = 16 * 1024;
  EXPECT_EQ(codegen::launch_misfit(l, h100),
            "40960 static + 16384 dynamic bytes of shared memory, over the 49152 bytes a kernel gets without the "
            "opt-in (the runtime opts in only above 49152 dynamic bytes)");
  l.static_shared = 50 * 1024;
  l.dynamic_shared = 0;
  EXPECT_EQ(codegen::launch_misfit(l, h100), "51200 bytes of static shared memory, over sm_90's 49152 bytes per block");
  EXPECT_THROW(codegen::arch_limits("sm_75"), Error);
}

TEST(LaunchFit, BoundsEveryKernelOnceAndRenamesAKernelLaunchedTwoWays) {
  codegen::NodeKernel a;
  a.name = "k_add_0123";
  a.source = "extern \"C\" __global__ void k_add_0123(float* out) {}\nint k_add_0123_sim() { return 0; }\n";
  a.grid = {8};
  a.block = {256};
  codegen::NodeKernel b = a;
  b.block = {128};
  codegen::LaunchBounder bounder;
  bounder.apply(a);
  EXPECT_EQ(a.name, "k_add_0123");
  EXPECT_NE(a.source.find("__global__ void __launch_bounds__(256) k_add_0123(float* out)"), std::string::npos)
      << a.source;
  EXPECT_EQ(codegen::declared_launch_bound(a.source, a.name), 256);
  bounder.apply(b);
  EXPECT_EQ(b.name, "k_add_0123_t128");
  EXPECT_NE(b.source.find("__global__ void __launch_bounds__(128) k_add_0123_t128(float* out)"), std::string::npos)
      << b.source;
  EXPECT_NE(b.source.find("int k_add_0123_t128_sim()"), std::string::npos) << b.source;
  // A kernel with its own bound (the tensor-core ones) keeps it.
  codegen::NodeKernel tc;
  tc.name = "k_mma";
  tc.source = "extern \"C\" __global__ void __launch_bounds__(128, 1) k_mma(float* out) {}\n";
  tc.grid = {1};
  tc.block = {128};
  const std::string before = tc.source;
  bounder.apply(tc);
  EXPECT_EQ(tc.source, before);
  EXPECT_EQ(codegen::declared_launch_bound(tc.source, "k_mma"), 128);
}

}  // namespace
}  // namespace kiln
