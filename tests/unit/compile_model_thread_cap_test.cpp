// `kiln compile`'s kernels line and --stats table (compiler/kernels_report.h)
// name the kernels the plan runs: when a launch misfits and the plan builder
// emits the node again with fewer threads per block (the one thread cap,
// compiler/plan_writer.h), the first, uncapped kernels, which the plan does
// not hold, are not listed, and the line says how many were emitted again.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <set>
#include <sstream>

#include "backends/plan_sim.h"
#include "codegen/launch_fit.h"
#include "compiler/compile_model.h"
#include "runtime/plan_format.h"

namespace kiln {
namespace {

// y = softmax(x) over 32,768 doubles: 1024-thread blocks (as
// LaunchFit.AMisfitAfterNvrtcIsEmittedAgainWithFewerThreads).
std::string softmax_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("softmax");
  for (const char* name : {"x", "y"}) {
    auto* v = std::string(name) == "x" ? g->add_input() : g->add_output();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::DOUBLE);
    t->mutable_shape()->add_dim()->set_dim_value(1);
    t->mutable_shape()->add_dim()->set_dim_value(32768);
  }
  auto* n = g->add_node();
  n->set_op_type("Softmax");
  n->add_input("x");
  n->add_output("y");
  return m.SerializeAsString();
}

// The kernel names of the --stats table (the lines before the kernels line).
std::set<std::string> stats_table_names(const std::string& log) {
  std::set<std::string> names;
  std::istringstream in(log);
  bool table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("kernel ", 0) == 0) {
      table = true;
      continue;
    }
    if (line.rfind("kernels: ", 0) == 0) table = false;
    if (table && !line.empty()) names.insert(line.substr(0, line.find(' ')));
  }
  return names;
}

TEST(CompileThreadCap, TheKernelsLineNamesThePlansKernels) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  CompileModelOptions o;
  o.build.pass.target = "sm_90";
  o.build.stats = true;
  o.build.kernel_cache = false;
  std::string log;
  o.log = [&](const std::string& s) { log += s; };
  codegen::ArchLimits small = codegen::arch_limits("sm_90");
  small.registers_per_block = 16384;  // a quarter of an H100's: the 1024-thread softmax misfits
  codegen::ScopedArchLimits scoped(small);
  CompileResult r = compile_model(ModelSource::memory(softmax_model(), "softmax.onnx"), o);
  plan::Plan p = plan::deserialize(r.plan.data(), r.plan.size());
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  std::set<std::string> in_plan;
  for (const plan::Kernel& k : p.kernels) in_plan.insert(k.name);
  EXPECT_EQ(stats_table_names(log), in_plan) << log;
  EXPECT_NE(log.find(" emitted again with fewer threads per block to fit\n"), std::string::npos) << log;
  EXPECT_EQ(r.report["kernels_distinct"].get<size_t>(), in_plan.size());
  EXPECT_GT(r.report["kernels_reemitted"].get<int>(), 0);
  for (const auto& d : r.report["kernels_detail"]) EXPECT_TRUE(in_plan.count(d["name"].get<std::string>())) << d.dump();
}

}  // namespace
}  // namespace kiln
