// One ONNX backend-test folder through the runtime's GPU path on the strict
// fake driver, against the reference backend (issue 14: "the same plans run
// on the strict fake driver and match the reference backend").
//
//   kiln_fake_gpu_plan_check TEST_DIR [--target sm_90] [--tolerance onnx|ort|ATOL,RTOL] [--run-time-inputs]
//
// --run-time-inputs: the model is compiled as `kiln compile` does
// (compile_model), its inputs run-time values, so a model whose result sizes
// the data decides becomes a GPU plan computed at the bounds
// (compiler/gpu_bounded_sizes.h); its outputs, trimmed by the runtime to the
// counts its kernels wrote, are compared with the data set's expected outputs
// (the zoo's come from ONNX Runtime) instead of the reference backend.
//
// The test's model is imported with its first data set's inputs known (as
// `kiln conformance` and `kiln conformance --write-plans` do), compiled for
// the target and written into a plan by the plan builder (NVRTC: CUBIN + PTX),
// then loaded with rt::Engine on the fake driver (tests/runtime/fake_cuda,
// loaded by path: H100 limits, asynchronous streams, capture rules, the race
// detector) with KILN backend GPU: module images, launches over the per-block
// limits, the captured CUDA Graph and its replay are the driver's to judge.
// Each launch runs the plan's own kernel (its CUDA source) on the CPU
// simulator, with the arguments the runtime passed. The outputs are compared
// with the reference backend on the same compiled graph and inputs.
//
// Prints one JSON line {"test", "status", "kernels", "launches", "message"}:
//   pass            every output equals the reference, no race, nothing leaked
//   fail            anything else once a GPU plan was built (exit 1)
//   not_compiled    the model does not import or compile for any target
//                   (kiln::Unsupported or an error before the plan builder)
//   no_gpu_kernels  the plan builder wrote a plan without GPU kernels (a node
//                   without an emitter; sm90_kernel_coverage's business)
//   ref_error       the reference backend cannot run the graph
// One test per process: NVRTC must run before the fake driver is loaded
// (it looks for the real driver's entry points), and the fake's sticky
// errors last for the process, as on a GPU.
#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/compare.h"
#include "backends/reference/executor.h"
#include "backends/sim/sim_module.h"
#include "compiler/compile.h"
#include "compiler/compile_model.h"
#include "compiler/plan_writer.h"
#include "conformance/conformance.h"
#include "ir/error.h"
#include "runtime/engine.h"
#include "tests/runtime/kernel_buffers.h"
#include "tests/runtime/sim_kernel_args.h"

namespace kiln {
namespace {

using CUdeviceptr = unsigned long long;

// The fake driver's test controls this check uses.
struct FakeDriver {
  void (*set_kernels)(int (*)(const char*),
                      int (*)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*));
  void (*stats)(int*);
  const char* (*take_races)();
  void (*set_device)(const char*);
  void (*set_kernel_buffers)(int (*)(const char*), int (*)(const char*, int, unsigned long long*));
};

FakeDriver load_fake_driver() {
  // Loaded by path before the runtime's dlopen("libcuda.so.1") (same SONAME).
  void* h = dlopen(KILN_FAKE_CUDA, RTLD_NOW | RTLD_GLOBAL);
  if (!h) fail("cannot load the fake driver {}: {}", KILN_FAKE_CUDA, dlerror());
  FakeDriver f;
  f.set_kernels = reinterpret_cast<decltype(f.set_kernels)>(dlsym(h, "fake_cuda_set_kernels"));
  f.stats = reinterpret_cast<decltype(f.stats)>(dlsym(h, "fake_cuda_stats"));
  f.take_races = reinterpret_cast<decltype(f.take_races)>(dlsym(h, "fake_cuda_take_races"));
  f.set_device = reinterpret_cast<decltype(f.set_device)>(dlsym(h, "fake_cuda_set_device"));
  f.set_kernel_buffers = reinterpret_cast<decltype(f.set_kernel_buffers)>(dlsym(h, "fake_cuda_set_kernel_buffers"));
  if (!f.set_kernels || !f.stats || !f.take_races || !f.set_device || !f.set_kernel_buffers)
    fail("{} lacks the fake driver's test controls", KILN_FAKE_CUDA);
  return f;
}

// The kernels the fake driver runs: name -> simulator entry and the element
// count of each argument (for the simulator's bounds checks; sim_kernel_counts).
struct SimKernel {
  codegen::SimEntry entry = nullptr;
  std::vector<long long> counts;
};
std::map<std::string, SimKernel> g_kernels;
std::atomic<long long> g_launches{0};
std::mutex g_error_mu;
std::string g_first_kernel_error;

int arg_count(const char* name) {
  auto it = g_kernels.find(name);
  return it == g_kernels.end() ? -1 : int(it->second.counts.size());
}

int launch(const char* name, const unsigned* grid, const unsigned* block, unsigned shared, const CUdeviceptr* args) {
  const SimKernel& k = g_kernels.at(name);
  std::vector<void*> bufs;
  for (size_t i = 0; i < k.counts.size(); ++i) bufs.push_back(reinterpret_cast<void*>(args[i]));
  sim::LaunchConfig cfg;
  cfg.kernel = name;
  cfg.grid = dim3(grid[0], grid[1], grid[2]);
  cfg.block = dim3(block[0], block[1], block[2]);
  cfg.shared_bytes = shared;
  ++g_launches;
  try {
    codegen::sim_launch(k.entry, cfg, bufs, k.counts);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(g_error_mu);
    if (g_first_kernel_error.empty()) g_first_kernel_error = std::string("kernel ") + name + ": " + e.what();
    return 719;  // CUDA_ERROR_LAUNCH_FAILED, as a faulting kernel on a GPU
  }
  return 0;
}

struct Result {
  std::string status, message;
  int kernels = 0;
  long long launches = 0;
};

Tolerance tolerance_for(const std::string& spec, DType dtype) {
  if (spec == "onnx") return onnx_runner_tolerance(dtype, "fp32");
  if (spec == "ort" || !is_float(dtype)) return run_tolerance(dtype, "fp32");
  return parse_tolerance(spec);
}

Result check(const std::string& dir, const std::string& target, const std::string& tol_spec, bool run_time_inputs) {
  Result r;
  std::map<std::string, Tensor> feed;
  std::unique_ptr<Graph> g;
  std::vector<Tensor> want;
  std::vector<std::string> out_names;
  plan::Plan p;
  if (run_time_inputs) {
    try {
      ConformanceSet set = read_conformance_set(dir, "test_data_set_0");
      feed = set.inputs;
      want = set.expected;
      CompileModelOptions o;
      o.build.pass.target = target;
      CompileResult cr = compile_model(ModelSource::file((std::filesystem::path(dir) / "model.onnx").string()), o);
      p = plan::deserialize(cr.plan.data(), cr.plan.size(), dir);
    } catch (const Unsupported& e) {
      return {"not_compiled", e.what()};
    } catch (const Error& e) {
      return {"fail", std::string("compile: ") + e.what()};
    }
  } else {
    try {
      g = std::move(import_conformance_case(dir, "test_data_set_0", &feed).graph);
      CompileOptions co;
      co.pass.target = target;
      compile_graph(*g, co);
    } catch (const Error& e) {  // Unsupported too: not the GPU path's business
      return {"not_compiled", e.what()};
    }
    try {
      p = build_plan(*g, {target, "fp32", {}, true, {}, (std::filesystem::path(dir) / "model.onnx").string()});
    } catch (const Unsupported& e) {  // what the GPU path cannot take, with a reason
      return {"not_compiled", e.what()};
    } catch (const Error& e) {  // compiles for the CPU, not for the GPU: a defect
      return {"fail", std::string("plan builder: ") + e.what()};
    }
    if (!p.meta.gpu_kernels) return {"no_gpu_kernels", p.meta.no_gpu_reason};
    try {
      want = ReferenceExecutor(*g).run(feed);
    } catch (const Error& e) {
      return {"ref_error", e.what()};
    }
    for (const Value* v : g->outputs()) out_names.push_back(v->name());
  }
  if (!p.meta.gpu_kernels) return {"no_gpu_kernels", p.meta.no_gpu_reason};
  r.kernels = int(p.kernels.size());

  // The plan's kernels for the simulator (host compiler, cached on disk).
  std::vector<codegen::KernelSource> sources;
  for (const plan::Kernel& k : p.kernels) sources.push_back({k.name, k.source});
  static codegen::SimCompiler compiler;
  std::map<std::string, codegen::SimEntry> entries;
  if (!sources.empty()) entries = compiler.compile(sources);
  // Every step's kernel (regions', in-place appends', launch variants'), a
  // shape-generic one with its kiln_syms slot (tests/runtime/sim_kernel_args.h).
  for (const auto& [name, counts] : fakegpu::sim_kernel_counts(p))
    g_kernels[name] = SimKernel{entries.at(name), counts};
  FakeDriver fake = load_fake_driver();
  fake.set_device("h100");
  fake.set_kernels(arg_count, launch);
  fakegpu::note_kernel_buffers(p);  // what each kernel reads and writes, for the race detector
  fake.set_kernel_buffers(fakegpu::kernel_table_size, fakegpu::kernel_buffer_use);
  std::vector<uint8_t> bytes = plan::serialize(p);
  std::vector<Tensor> got;
  try {
    auto e = rt::Engine::load(bytes.data(), bytes.size(), dir, rt::Backend::Gpu);
    rt::Context ctx(e);
    for (const rt::TensorDesc& d : e->inputs()) {
      auto it = feed.find(d.name);
      if (it == feed.end()) fail("the plan's input \"{}\" is not in the test's data set", d.name);
      ctx.bind_input(d.name, it->second.raw(), d.type, false);
    }
    // Bound at the shape the context gives before a run: the bound, for an
    // output whose size the data decides.
    for (const rt::TensorDesc& d : e->outputs()) got.emplace_back(TensorType(d.type.dtype, ctx.output_shape(d.name)));
    for (size_t i = 0; i < got.size(); ++i) ctx.bind_output(e->outputs()[i].name, got[i].raw(), got[i].type(), false);
    ctx.run();
    for (size_t i = 0; i < got.size(); ++i) {
      // The real shape after the run; the runtime moved the entries to the front.
      Tensor t(TensorType(got[i].dtype(), ctx.output_shape(e->outputs()[i].name)));
      if (t.nbytes()) std::memcpy(t.raw(), got[i].raw(), t.nbytes());
      got[i] = std::move(t);
    }
    if (out_names.empty())
      for (const rt::TensorDesc& d : e->outputs()) out_names.push_back(d.name);
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (!g_first_kernel_error.empty()) why += " (" + g_first_kernel_error + ")";
    return {"fail", "GPU path: " + why, r.kernels, g_launches};
  }
  r.launches = g_launches;
  std::string races = fake.take_races();
  if (!races.empty()) return {"fail", "the fake driver found races: " + races, r.kernels, r.launches};
  std::vector<int> stats(12);
  fake.stats(stats.data());
  if (stats[5] != 0)
    return {"fail", fmt::format("{} device allocations left after the engine", stats[5]), r.kernels, r.launches};
  if (got.size() != want.size())
    return {"fail", fmt::format("{} outputs, the reference has {}", got.size(), want.size()), r.kernels, r.launches};
  for (size_t i = 0; i < got.size(); ++i) {
    std::string diff = compare_tensors(got[i], want[i], tolerance_for(tol_spec, want[i].dtype()));
    if (!diff.empty())
      return {"fail",
              fmt::format("output {} (\"{}\") differs from the {}: {}", i, out_names[i],
                          run_time_inputs ? "data set's expected outputs" : "reference", diff),
              r.kernels, r.launches};
  }
  r.status = "pass";
  return r;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  std::string dir, target = "sm_90", tol = "ort";
  bool run_time_inputs = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--run-time-inputs") {
      run_time_inputs = true;
    } else if (a == "--target" && i + 1 < argc) {
      target = argv[++i];
    } else if (a == "--tolerance" && i + 1 < argc) {
      tol = argv[++i];
    } else if (!a.empty() && a[0] != '-' && dir.empty()) {
      dir = a;
    } else {
      std::cerr << "usage: kiln_fake_gpu_plan_check TEST_DIR [--target sm_90] [--tolerance onnx|ort|ATOL,RTOL] "
                   "[--run-time-inputs]\n";
      return 2;
    }
  }
  if (dir.empty()) {
    std::cerr << "usage: kiln_fake_gpu_plan_check TEST_DIR [--target sm_90] [--tolerance onnx|ort|ATOL,RTOL] "
                 "[--run-time-inputs]\n";
    return 2;
  }
  kiln::Result r;
  try {
    r = kiln::check(dir, target, tol, run_time_inputs);
  } catch (const std::exception& e) {
    r = {"fail", std::string("internal error: ") + e.what()};
  }
  nlohmann::json j = {{"test", dir},
                      {"status", r.status},
                      {"kernels", r.kernels},
                      {"launches", r.launches},
                      {"message", r.message.substr(0, 2000)}};
  std::cout << j.dump() << std::endl;
  return r.status == "fail" ? 1 : 0;
}
