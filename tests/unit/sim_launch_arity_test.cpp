// sim_launch checks the buffers against the kernel's parameters: a simulator
// entry reads buffers[i] for each parameter i, so too few buffers read past
// the caller's array (a crash or garbage inside the kernel): a clear
// kiln::Error naming the kernel and both counts, before the entry runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/sim/sim_module.h"
#include "codegen/emitters/elementwise/emit_pointwise.h"
#include "codegen/launch_fit.h"
#include "ir/error.h"
#include "ops/registry.h"

namespace kiln {
namespace {

TEST(SimLaunch, ParameterCountComesFromTheKernelsSignature) {
  EXPECT_EQ(codegen::kernel_param_count("extern \"C\" __global__ void k(KILN_PTR(float) out, "
                                        "KILN_PTR(const float) in0, KILN_PTR(const float) in1) {}",
                                        "k"),
            3);
  EXPECT_EQ(codegen::kernel_param_count("__global__ void __launch_bounds__(128, 1) k(float* out) {}", "k"), 1);
  EXPECT_EQ(codegen::kernel_param_count("__global__ void k() {}", "k"), 0);
  EXPECT_EQ(codegen::kernel_param_count("__global__ void k2(float* a, float* b) {}", "k"), -1) << "another kernel";
}

TEST(SimLaunch, FewerBuffersThanParametersAreAClearError) {
  codegen::PointwiseKernel k = codegen::emit_pointwise_op(op_registry().get("relu"), {}, {TensorType(DType::F32, {64})},
                                                          TensorType(DType::F32, {64}));
  codegen::SimCompiler sim;
  codegen::SimEntry entry = sim.compile({{k.name, k.source}}).at(k.name);
  EXPECT_EQ(entry.params, 2) << "out, in0";
  std::vector<float> x(64, -1.0f), y(64, 7.0f), z(64);
  sim::LaunchConfig cfg;
  cfg.kernel = k.name;
  cfg.grid = dim3(k.grid);
  cfg.block = dim3(k.block);
  codegen::sim_launch(entry, cfg, {y.data(), x.data()}, {64, 64});
  EXPECT_EQ(y[0], 0.0f);
  // One buffer for two parameters: the entry would read past the array.
  try {
    codegen::sim_launch(entry, cfg, {y.data()}, {64});
    ADD_FAILURE() << "1 buffer: no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel " + k.name + " takes 2 buffer parameter(s), the launch passed only 1"),
              std::string::npos)
        << e.what();
  }
  // More buffers than parameters: the first ones are bound (a node's kernels
  // share its bindings, and a driver reads only the parameters the image has).
  std::fill(y.begin(), y.end(), 7.0f);
  codegen::sim_launch(entry, cfg, {y.data(), x.data(), z.data()}, {64, 64, 64});
  EXPECT_EQ(y[0], 0.0f);
}

}  // namespace
}  // namespace kiln
