#include "codegen/nvrtc/nvrtc_compiler.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <map>
#include <regex>
#include <thread>

#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_library.h"
#include "ir/error.h"

namespace kiln::codegen {
namespace {

// Max over all matches of `re` (first group) in `log`; -1 if none.
int max_match(const std::string& log, const std::regex& re) {
  int best = -1;
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it)
    best = std::max(best, std::stoi((*it)[1].str()));
  return best;
}

using Program = NvrtcLibrary::Program;
constexpr NvrtcLibrary::Result kOk = NvrtcLibrary::kSuccess;

std::string program_log(const NvrtcLibrary& nv, Program p) {
  size_t n = 0;
  if (nv.GetProgramLogSize(p, &n) != kOk || n == 0) return {};
  std::string log(n, '\0');
  if (nv.GetProgramLog(p, log.data()) != kOk) return {};
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

struct OwnedProgram {  // owns an NVRTC program
  const NvrtcLibrary& nv;
  Program p = nullptr;
  ~OwnedProgram() {
    if (p) nv.DestroyProgram(&p);
  }
};

}  // namespace

void parse_ptxas_report(const std::string& log, CompiledKernel& k) {
  static const std::regex regs(R"(Used (\d+) registers)"), smem(R"((\d+) bytes smem)"),
      stores(R"((\d+) bytes spill stores)"), loads(R"((\d+) bytes spill loads)");
  k.registers = max_match(log, regs);
  if (k.registers < 0) {  // no entry function reported
    k.shared_bytes = k.spill_bytes = -1;
    return;
  }
  // ptxas omits "smem" for kernels without static shared memory.
  k.shared_bytes = std::max(0, max_match(log, smem));
  k.spill_bytes = std::max(0, max_match(log, stores)) + std::max(0, max_match(log, loads));
}

std::string nvrtc_version() {
  const NvrtcLibrary& nv = nvrtc_library();
  return fmt::format("{}.{}", nv.major, nv.minor);
}

KernelCompiler::KernelCompiler(std::string arch, KernelCache* cache, std::vector<std::string> extra_options)
    : arch_(std::move(arch)), cache_(cache) {
  // sm_90a: Hopper's arch-specific target, for the kernels that use wgmma
  // (codegen/core/wgmma.cuh); its CUBIN loads on sm_90 devices only and its
  // PTX (compute_90a) JITs on none other.
  static const char* const archs[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
  if (std::find(std::begin(archs), std::end(archs), arch_) == std::end(archs))
    fail("codegen: unsupported GPU arch '{}' (expected sm_80, sm_86, sm_89, sm_90 or sm_90a)", arch_);
  // KILN_CUDA_INCLUDE_DIR in the environment replaces the build's header
  // folder: a relocated kiln (bench/device_bundle.sh) brings its own headers.
  const char* headers = std::getenv("KILN_CUDA_INCLUDE_DIR");
  options_ = {"--std=c++17",     "-arch=" + arch_,
              "-default-device", std::string("-I") + (headers && *headers ? headers : KILN_CUDA_INCLUDE_DIR),
              "-Xptxas",         "-v"};
  options_.insert(options_.end(), extra_options.begin(), extra_options.end());
}

CompiledKernel KernelCompiler::compile_unique(const KernelSource& ks) {
  std::string key;
  if (cache_) {
    key = KernelCache::make_key(ks.source, options_, arch_, nvrtc_version());
    if (auto hit = cache_->lookup(key)) {
      ++cache_hits_;
      hit->name = ks.name;
      return std::move(*hit);
    }
  }
  ++compilations_;
  const NvrtcLibrary& nv = nvrtc_library();
  OwnedProgram prog{nv};
  // The program name is fixed so that the result depends on the source only.
  if (NvrtcLibrary::Result cr = nv.CreateProgram(&prog.p, ks.source.c_str(), "kernel.cu", 0, nullptr, nullptr);
      cr != kOk)
    fail("kernel '{}': nvrtcCreateProgram failed ({})", ks.name, nv.GetErrorString(cr));
  std::vector<const char*> opts;
  for (const auto& o : options_) opts.push_back(o.c_str());
  NvrtcLibrary::Result r = nv.CompileProgram(prog.p, static_cast<int>(opts.size()), opts.data());
  CompiledKernel k;
  k.name = ks.name;
  k.arch = arch_;
  k.log = program_log(nv, prog.p);
  if (r != kOk)
    fail("kernel '{}': NVRTC compilation for {} failed ({}):\n{}", ks.name, arch_, nv.GetErrorString(r), k.log);
  size_t n = 0;
  if (nv.GetCUBINSize(prog.p, &n) != kOk || n == 0) fail("kernel '{}': NVRTC produced no CUBIN for {}", ks.name, arch_);
  k.cubin.resize(n);
  if (nv.GetCUBIN(prog.p, reinterpret_cast<char*>(k.cubin.data())) != kOk)
    fail("kernel '{}': nvrtcGetCUBIN failed", ks.name);
  if (nv.GetPTXSize(prog.p, &n) != kOk || n == 0) fail("kernel '{}': NVRTC produced no PTX for {}", ks.name, arch_);
  k.ptx.assign(n, '\0');
  if (nv.GetPTX(prog.p, k.ptx.data()) != kOk) fail("kernel '{}': nvrtcGetPTX failed", ks.name);
  while (!k.ptx.empty() && k.ptx.back() == '\0') k.ptx.pop_back();
  parse_ptxas_report(k.log, k);
  if (cache_) cache_->store(key, k);
  return k;
}

std::vector<CompiledKernel> KernelCompiler::compile(const std::vector<KernelSource>& kernels) {
  // Identical sources are compiled once: unique[i] is the first kernel with
  // that source, which[j] the unique index serving kernel j.
  std::map<std::string_view, size_t> seen;
  std::vector<size_t> unique, which(kernels.size());
  for (size_t j = 0; j < kernels.size(); ++j) {
    auto [it, inserted] = seen.emplace(kernels[j].source, unique.size());
    if (inserted) unique.push_back(j);
    which[j] = it->second;
  }
  std::vector<CompiledKernel> done(unique.size());
  std::vector<std::exception_ptr> errors(unique.size());
  std::atomic<size_t> next{0};
  std::atomic<int> finished{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < unique.size();) {
      try {
        done[i] = compile_unique(kernels[unique[i]]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
      if (progress_) progress_(++finished, static_cast<int>(unique.size()));
    }
  };
  size_t n_threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), unique.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n_threads; ++t) pool.emplace_back(worker);
  worker();  // the calling thread works too
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<CompiledKernel> out;
  out.reserve(kernels.size());
  for (size_t j = 0; j < kernels.size(); ++j) {
    out.push_back(done[which[j]]);
    out.back().name = kernels[j].name;
  }
  return out;
}

}  // namespace kiln::codegen
