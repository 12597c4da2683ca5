#include "compiler/autotune.h"

#ifdef KILN_HAVE_CODEGEN
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "codegen/kernel_build.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "codegen/emitter_table.h"
#include "ir/error.h"
#include "runtime/cuda_driver.h"
#include "runtime/gpu_executor.h"

namespace kiln {

namespace {

using rt::CudaDriver;
using rt::CUdeviceptr;

// Emits `n` with `chooser` installed (on this thread, where emitters ask).
std::vector<codegen::NodeKernel> emit_with(const Node& n, codegen::GemmTileChooser chooser) {
  codegen::ScopedGemmTileChooser scope(std::move(chooser));
  return codegen::emitter_for(n)->emit(n);
}

// Device memory for one node's values (and a candidate's extra tensors),
// freed on destruction.
class DeviceBuffers {
 public:
  explicit DeviceBuffers(const CudaDriver& d) : d_(d) {}
  ~DeviceBuffers() {
    for (CUdeviceptr p : owned_) d_.cuMemFree(p);
  }
  CUdeviceptr value(const Value* v) {
    auto it = values_.find(v);
    if (it != values_.end()) return it->second;
    CUdeviceptr p = upload(v->is_constant() ? v->data().raw() : nullptr, v->type().nbytes());
    values_.emplace(v, p);
    return p;
  }
  // A fresh allocation holding `bytes` bytes of `data` (null: zeros).
  CUdeviceptr upload(const void* data, size_t bytes) {
    CUdeviceptr p = 0;
    d_.check(d_.cuMemAlloc(&p, std::max<size_t>(bytes, 1)), "allocating a tuning buffer");
    owned_.push_back(p);
    if (bytes) {
      std::vector<uint8_t> zeros;
      if (!data) {
        zeros.assign(bytes, 0);
        data = zeros.data();
      }
      d_.check(d_.cuMemcpyHtoD(p, data, bytes), "filling a tuning buffer");
    }
    return p;
  }

 private:
  const CudaDriver& d_;
  std::map<const Value*, CUdeviceptr> values_;
  std::vector<CUdeviceptr> owned_;
};

struct Candidate {
  codegen::GemmTileConfig config;
  std::vector<codegen::NodeKernel> kernels;
};

// The median time of one candidate's launches, in ms. Throws kiln::Error when
// the driver refuses it.
double time_candidate(const CudaDriver& d, const Node& n, const Candidate& c,
                      const std::map<std::string, const codegen::CompiledKernel*>& compiled, DeviceBuffers& values,
                      rt::CUstream stream, int warmup, int iterations) {
  struct Launch {
    rt::CUfunction fn;
    const codegen::NodeKernel* k;
    std::vector<CUdeviceptr> args;
  };
  std::vector<rt::CUmodule> modules;
  DeviceBuffers extras(d);
  std::vector<rt::CUevent> events;
  auto cleanup = [&] {
    for (rt::CUevent e : events) d.cuEventDestroy(e);
    for (rt::CUmodule m : modules) d.cuModuleUnload(m);
  };
  try {
    std::vector<Launch> launches;
    // The candidate's scratch (split-K partial sums), shared by its kernels; contents do not matter.
    CUdeviceptr workspace = 0;
    if (const int64_t ws = codegen::node_workspace_bytes(c.kernels); ws > 0)
      workspace = extras.upload(nullptr, static_cast<size_t>(ws));
    // A folded split-K's tile counters: zeroed once (upload of nothing); the
    // kernel leaves them zero, so the timed repetitions can reuse them.
    CUdeviceptr tickets = 0;
    if (const int64_t n = codegen::node_tile_counters(c.kernels); n > 0)
      tickets = extras.upload(nullptr, static_cast<size_t>(n) * 4);
    for (const codegen::NodeKernel& k : c.kernels) {
      if (k.grid.count() == 0) continue;
      const codegen::CompiledKernel& ck = *compiled.at(k.name);
      rt::CUmodule m = nullptr;
      d.check(d.cuModuleLoadData(&m, ck.cubin.data()), ("loading " + k.name).c_str());
      modules.push_back(m);
      Launch l{nullptr, &k, {}};
      d.check(d.cuModuleGetFunction(&l.fn, m, k.name.c_str()), ("finding " + k.name).c_str());
      if (k.shared_bytes > 48 * 1024)
        d.check(d.cuFuncSetAttribute(l.fn, rt::kFuncAttrMaxDynamicShared, int(k.shared_bytes)),
                "allowing large dynamic shared memory");
      if (k.results.empty()) {
        for (int r = 0; r < n.num_outputs(); ++r) l.args.push_back(values.value(n.output(r)));
      } else {
        for (int r : k.results) l.args.push_back(values.value(n.output(r)));
      }
      for (const Value* v : n.inputs()) l.args.push_back(values.value(v));
      for (const Tensor& t : k.extra) l.args.push_back(extras.upload(t.raw(), t.nbytes()));
      if (k.workspace_f32 > 0) l.args.push_back(workspace);
      if (k.tile_counters > 0) l.args.push_back(tickets);
      launches.push_back(std::move(l));
    }
    auto launch_all = [&] {
      for (Launch& l : launches) {
        std::vector<void*> params;
        for (CUdeviceptr& p : l.args) params.push_back(&p);
        d.check(d.cuLaunchKernel(l.fn, l.k->grid.x, l.k->grid.y, l.k->grid.z, l.k->block.x, l.k->block.y, l.k->block.z,
                                 unsigned(l.k->shared_bytes), stream, params.data(), nullptr),
                ("launching " + l.k->name).c_str());
      }
    };
    for (int i = 0; i < warmup; ++i) launch_all();
    events.resize(size_t(iterations) + 1, nullptr);
    for (rt::CUevent& e : events) d.check(d.cuEventCreate(&e, rt::kEventDefault), "cuEventCreate");
    d.check(d.cuEventRecord(events[0], stream), "cuEventRecord");
    for (int i = 0; i < iterations; ++i) {
      launch_all();
      d.check(d.cuEventRecord(events[size_t(i) + 1], stream), "cuEventRecord");
    }
    d.check(d.cuEventSynchronize(events.back()), "waiting for the timed launches");
    std::vector<double> ms;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      float t = 0;
      d.check(d.cuEventElapsedTime(&t, events[i], events[i + 1]), "cuEventElapsedTime");
      ms.push_back(t);
    }
    cleanup();
    std::sort(ms.begin(), ms.end());
    return ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  } catch (...) {
    cleanup();
    throw;
  }
}

}  // namespace

std::vector<GemmProblemSite> gemm_problems(const Graph& g) {
  std::vector<GemmProblemSite> out;
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    if (codegen::is_view_node(n) || !codegen::emitter_for(n)) continue;
    emit_with(n, [&](const codegen::GemmProblem& p) -> std::optional<codegen::GemmTileConfig> {
      std::string key = codegen::gemm_problem_key(p);
      if (std::none_of(out.begin(), out.end(), [&](const GemmProblemSite& s) { return s.key == key; }))
        out.push_back({p, key, &n});
      return std::nullopt;
    });
  }
  return out;
}

AutotuneOutcome autotune(const Graph& g, const AutotuneRequest& r) {
  AutotuneOutcome out;
  // The GPU first: no point compiling candidates without one.
  std::string why;
  const CudaDriver* driver = rt::cuda_driver(&why);
  if (!driver) fail("kiln compile --tune needs a GPU: {}", why);
  const CudaDriver& d = *driver;
  rt::DeviceIdentity id = rt::device_identity(d);
  out.gpu = id.name;
  out.cc = fmt::format("{}.{}", id.major, id.minor);
  if (id.arch() != r.target)
    fail("kiln compile --tune: the GPU ({}) is {}, the target is {}: tune with --target {}", id.name, id.arch(),
         r.target, id.arch());
  if (r.iterations < 1 || r.warmup < 0) fail("kiln compile --tune: iterations must be >= 1, warmup >= 0");

  // Every candidate of every wanted problem, emitted and compiled together.
  std::vector<GemmProblemSite> sites;
  for (GemmProblemSite& s : gemm_problems(g))
    if (!r.wanted || r.wanted(out.gpu, s.key)) sites.push_back(std::move(s));
  if (sites.empty()) return out;
  std::vector<std::vector<Candidate>> candidates;
  std::vector<codegen::KernelSource> sources;
  std::map<std::string, bool> seen;
  for (const GemmProblemSite& s : sites) {
    candidates.emplace_back();
    for (const codegen::GemmTileConfig& c : codegen::gemm_tile_candidates(s.problem)) {
      Candidate cand{c,
                     emit_with(*s.node, [&](const codegen::GemmProblem& p) -> std::optional<codegen::GemmTileConfig> {
                       if (codegen::gemm_problem_key(p) == s.key) return c;
                       return std::nullopt;
                     })};
      for (const codegen::NodeKernel& k : cand.kernels)
        if (!std::exchange(seen[k.name], true)) sources.push_back({k.name, k.source});
      candidates.back().push_back(std::move(cand));
    }
  }
  codegen::KernelCache cache(r.kernel_cache_dir);
  codegen::KernelCompiler compiler(r.target, r.use_kernel_cache ? &cache : nullptr);
  std::vector<codegen::CompiledKernel> compiled_list = compiler.compile(sources);
  std::map<std::string, const codegen::CompiledKernel*> compiled;
  for (const codegen::CompiledKernel& k : compiled_list) compiled[k.name] = &k;

  rt::CUdevice dev = 0;
  d.check(d.cuDeviceGet(&dev, 0), "cuDeviceGet");
  rt::CUcontext ctx = nullptr;
  d.check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  rt::CUstream stream = nullptr;
  try {
    rt::CtxScope scope(d, ctx);
    d.check(d.cuStreamCreate(&stream, rt::kStreamNonBlocking), "cuStreamCreate");
    for (size_t i = 0; i < sites.size(); ++i) {
      const GemmProblemSite& s = sites[i];
      DeviceBuffers values(d);
      AutotuneWinner w;
      w.problem = s.key;
      double best = 0;
      for (const Candidate& c : candidates[i]) {
        double ms = 0;
        try {
          ms = time_candidate(d, *s.node, c, compiled, values, stream, r.warmup, r.iterations);
        } catch (const rt::CudaError& e) {
          // A faulting candidate (illegal address...) poisons the CUDA context:
          // every later call fails, so no other candidate can be timed.
          if (rt::is_sticky_error(e.code()))
            fail("kiln compile --tune: GEMM {}: tile {} left the GPU unusable, tuning stops: {}", s.key,
                 codegen::gemm_tile_name(c.config), e.what());
          out.notes.push_back(
              fmt::format("{}: tile {} skipped: {}", s.key, codegen::gemm_tile_name(c.config), e.what()));
          continue;
        } catch (const Error& e) {
          out.notes.push_back(
              fmt::format("{}: tile {} skipped: {}", s.key, codegen::gemm_tile_name(c.config), e.what()));
          continue;
        }
        if (w.candidates++ == 0 || ms < best) {
          best = ms;
          w.config = c.config;
        }
      }
      if (!w.candidates) fail("kiln compile --tune: every candidate of GEMM {} failed ({})", s.key, out.notes.back());
      w.ms = best;
      out.winners.push_back(w);
      std::fprintf(stderr, "tuned %zu/%zu: GEMM %s: %s, %.4f ms (median; %d candidates)\n", i + 1, sites.size(),
                   s.key.c_str(), codegen::gemm_tile_name(w.config).c_str(), w.ms, w.candidates);
    }
    d.cuStreamDestroy(stream);
  } catch (...) {
    if (stream) d.cuStreamDestroy(stream);
    d.cuDevicePrimaryCtxRelease(dev);
    throw;
  }
  d.cuDevicePrimaryCtxRelease(dev);
  return out;
}

}  // namespace kiln

#else  // no codegen: nothing to tune

#include "ir/error.h"

namespace kiln {
std::vector<GemmProblemSite> gemm_problems(const Graph&) { return {}; }
AutotuneOutcome autotune(const Graph&, const AutotuneRequest&) {
  fail("kiln compile --tune: kiln was built without NVRTC (codegen), so there are no GPU kernels to tune");
}
}  // namespace kiln

#endif
