// The compute emitters on real-model shapes: every conv/gemm/matmul node of
// the five real models after the default fp16 sm_90 pipeline compiles with
// NVRTC for sm_80 and sm_90, and a sample runs on the simulator against the
// reference (the small cases are in codegen_compute_test.cpp).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <tuple>
#include <unordered_map>

#include "backends/reference/executor.h"
#include "codegen/emitters/gemm_conv/emit_epilogue.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_executor.h"
#include "backends/sim/sim_module.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "passes/pass.h"
#include "backends/compare.h"
#include "compiler/compile.h"
#include "codegen_compute_util.h"
#include "conformance/conformance.h"

namespace kiln {
namespace {

using kiln::testing::tolerance_for;

namespace fs = std::filesystem;

// $KILN_MODELS_DIR, else build/models beside build/bin (as memory_plan_test).
fs::path models_dir() {
  if (const char* env = std::getenv("KILN_MODELS_DIR")) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path().parent_path() / "models";
}

// Real-model shapes: every conv/gemm/matmul node (fused with its epilogue) of ResNet-50 and BERT-base
// compiled by the default fp16 sm_90 pipeline compiles with NVRTC for sm_80 and sm_90 without spills, and a
// sample of them runs on the simulator matching the reference run of the node's body on random operands.
TEST(CodegenComputeModels, RealModelAnchorsCompileAndMatch) {
  int found = 0;
  for (const char* m : {"resnet50", "mobilenet_v2", "bert_base", "gpt2", "vit_b_16"}) {
    fs::path dir = models_dir() / m;
    if (!fs::exists(dir / "model.onnx") || !fs::exists(dir / "test_data_set_0")) continue;
    ++found;
    auto g = import_conformance_case(dir.string(), "test_data_set_0", nullptr).graph;
    CompileOptions o;
    o.pass.precision = "fp16";
    o.pass.target = "sm_90";
    compile_graph(*g, o);
    std::vector<const Node*> nodes;
    std::vector<codegen::NodeKernel> kernels;
    std::vector<codegen::KernelSource> sources;
    std::map<std::string, bool> seen;
    size_t anchors = 0;  // GEMM/conv nodes, split or not
    for (const auto& np : g->nodes()) {
      const codegen::KernelEmitter* e = codegen::emitter_for(*np);
      if (!e || (std::string(e->name) != "gemm" && std::string(e->name) != "conv")) continue;
      std::vector<codegen::NodeKernel> ks;
      ASSERT_NO_THROW(ks = e->emit(*np)) << np->describe();
      ASSERT_GE(ks.size(), 1u);
      ++anchors;
      for (const codegen::NodeKernel& k : ks) {  // every kernel goes through NVRTC below
        if (!seen[k.name]) sources.push_back({k.name, k.source});
        seen[k.name] = true;
      }
      // The simulator sample below runs one kernel per node; a split-K node
      // (partial sums in a workspace, then a reduction) is checked on the
      // simulator by CodegenTensorCore's split cases instead.
      if (ks.size() != 1) continue;
      nodes.push_back(np.get());
      kernels.push_back(ks[0]);
    }
    // ResNet-50: 53 convs + the fc gemm; the transformers: 4 GEMMs per layer (qkv merged) + a head.
    EXPECT_GE(anchors, std::string(m) == "resnet50" ? 54u : std::string(m) == "mobilenet_v2" ? 53u : 49u) << m;
    ASSERT_FALSE(nodes.empty()) << m << ": no single-kernel GEMM/conv node to run on the simulator";
    codegen::KernelCache cache;
    int max_regs = 0, spills = 0;
    for (std::string arch : {"sm_80", "sm_90"}) {
      codegen::KernelCompiler compiler(arch, &cache);
      std::vector<codegen::CompiledKernel> ks;
      ASSERT_NO_THROW(ks = compiler.compile(sources)) << m;
      for (const auto& k : ks) {
        max_regs = std::max(max_regs, k.registers);
        spills += k.spill_bytes > 0;
      }
    }
    // A sample on the simulator: every 8th node (the first and last included), body vs kernel.
    // Nodes above 2^30 multiply-adds (GPT-2's vocabulary projection) are left to the GPU.
    auto macs = [&](const Node& n) {
      const Node& a =
          n.body() ? codegen::Epilogue::from_fused(n, op_registry(), {"conv", "gemm", "matmul"}).anchor() : n;
      const Shape& w = a.input(1)->shape();
      int64_t k = a.op() == "conv"   ? a.input(1)->type().numel() / w[0]
                  : a.op() == "gemm" ? (a.attrs().get_int("trans_b", 0) ? w[1] : w[0])
                                     : (w.size() == 1 ? w[0] : w[w.size() - 2]);
      return a.output(0)->type().numel() * k;
    };
    std::vector<size_t> sample;
    for (size_t i = 0; i < nodes.size(); i += 8)
      if (macs(*nodes[i]) <= (int64_t{1} << 30)) sample.push_back(i);
    if (macs(*nodes.back()) <= (int64_t{1} << 30) && sample.back() != nodes.size() - 1)
      sample.push_back(nodes.size() - 1);
    std::vector<codegen::KernelSource> sim_sources;
    std::map<std::string, bool> sim_seen;
    for (size_t i : sample)
      if (!sim_seen[kernels[i].name]) {
        sim_seen[kernels[i].name] = true;
        sim_sources.push_back({kernels[i].name, kernels[i].source});
      }
    codegen::SimCompiler sim;
    std::map<std::string, codegen::SimEntry> entries = sim.compile(sim_sources);
    int matched = 0;
    for (size_t i : sample) {
      const Node& n = *nodes[i];
      SCOPED_TRACE(fmt::format("{} {}", m, n.describe()));
      // Operands: constants as they are, the rest seeded random data.
      std::vector<Tensor> ins;
      std::mt19937_64 rng(i + 1);
      std::normal_distribution<double> normal(0.0, 1.0);
      for (Value* v : n.inputs()) {
        if (v->is_constant()) {
          ins.push_back(v->data());
          continue;
        }
        Tensor t(v->type());
        for (int64_t e = 0; e < t.numel(); ++e) t.set_double(e, normal(rng));
        ins.push_back(std::move(t));
      }
      std::vector<Tensor> want;
      if (n.body()) {
        std::map<std::string, Tensor> feed;
        for (size_t k = 0; k < ins.size(); ++k) feed[n.body()->inputs()[k]->name()] = ins[k];
        want = ReferenceExecutor(*n.body()).run(feed);
      } else {
        std::vector<const Tensor*> ptrs;
        for (const Tensor& t : ins) ptrs.push_back(&t);
        std::vector<TensorType> outs;
        for (int r = 0; r < n.num_outputs(); ++r) outs.push_back(n.output(r)->type());
        want = evaluate_op(op_registry().get(n.op()), n.attrs(), ptrs, outs, n.describe());
      }
      std::vector<Tensor> got;
      std::vector<void*> bufs;
      std::vector<long long> counts;
      for (int r = 0; r < n.num_outputs(); ++r) {
        got.emplace_back(n.output(r)->type());
        bufs.push_back(got.back().raw());
        counts.push_back(got.back().numel());
      }
      for (const Tensor& t : ins) {
        bufs.push_back(const_cast<void*>(t.raw()));
        counts.push_back(t.numel());
      }
      for (const Tensor& t : kernels[i].extra) {
        bufs.push_back(const_cast<void*>(t.raw()));
        counts.push_back(t.numel());
      }
      // The scratch and the tile counters (zero at the start) a split-K kernel
      // binds after its buffers, as the sim backend does: without them the
      // simulator entry read past `bufs` (sim_launch now refuses that).
      const Tensor workspace(TensorType(DType::F32, {std::max<int64_t>(kernels[i].workspace_f32, 0)}));
      const Tensor counters(TensorType(DType::U32, {std::max<int64_t>(kernels[i].tile_counters, 0)}));
      for (const Tensor* t : {&workspace, &counters})
        if (t->numel() > 0) {
          bufs.push_back(const_cast<void*>(t->raw()));
          counts.push_back(t->numel());
        }
      sim::LaunchConfig cfg;
      cfg.kernel = kernels[i].name;
      cfg.grid = dim3(kernels[i].grid.x, kernels[i].grid.y, kernels[i].grid.z);
      cfg.block = dim3(kernels[i].block.x, kernels[i].block.y, kernels[i].block.z);
      cfg.shared_bytes = kernels[i].shared_bytes;  // the tensor-core kernels use dynamic shared memory
      ASSERT_NO_THROW(codegen::sim_launch(entries.at(kernels[i].name), cfg, bufs, counts));
      bool ok = true;
      // An f16 anchor rounds its result to f16 before any cast to f32 in the epilogue: f16 tolerance.
      const Node& anchor =
          n.body() ? codegen::Epilogue::from_fused(n, op_registry(), {"conv", "gemm", "matmul"}).anchor() : n;
      const DType adt = anchor.output(0)->dtype();
      for (size_t r = 0; r < got.size(); ++r) {
        std::string diff = compare_tensors(
            got[r], want[r], tolerance_for(adt == DType::F16 || adt == DType::BF16 ? adt : want[r].dtype()));
        EXPECT_EQ(diff, "") << "result " << r;
        ok = ok && diff.empty();
      }
      matched += ok;
    }
    fmt::print(
        "codegen compute, {} fp16 sm_90: {} conv/gemm nodes, {} distinct kernels, max registers {}, {} with "
        "spills; {} of {} sampled nodes match the reference on the simulator\n",
        m, nodes.size(), sources.size(), max_regs, spills, matched, sample.size());
    EXPECT_EQ(spills, 0) << m;
    EXPECT_EQ(matched, static_cast<int>(sample.size())) << m;
  }
  if (!found) GTEST_SKIP() << "no models under " << models_dir() << " (or set KILN_MODELS_DIR)";
}

}  // namespace
}  // namespace kiln
