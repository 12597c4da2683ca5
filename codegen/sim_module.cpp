#include "codegen/sim_module.h"

#include <dlfcn.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "ir/error.h"

namespace kiln::codegen {
namespace fs = std::filesystem;

namespace {

fs::path default_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "kiln";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "kiln";
  return fs::temp_directory_path() / "kiln-cache";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `data` to `p` through a temporary file and a rename.
bool write_atomically(const fs::path& p, const std::string& data) {
  static std::atomic<unsigned> seq{0};
  fs::path tmp = p;
  tmp += fmt::format(".tmp{}.{}", ::getpid(), seq++);
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) return false;
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

std::string quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// The process must export the simulator runtime for modules to link. (Taking
// the runtime's addresses here also makes the linker keep it.)
void check_runtime_exported() {
  static const bool ok =
      dlsym(RTLD_DEFAULT, "_ZN4kiln3sim6detail10tls_threadE") == &kiln::sim::detail::tls_thread &&
      dlsym(RTLD_DEFAULT, "_ZN4kiln3sim8run_gridERKNS0_12LaunchConfigERKSt8functionIFvvEE") ==
          reinterpret_cast<void*>(&kiln::sim::run_grid);
  if (!ok)
    fail("simulator: this executable does not export the simulator runtime (kiln::sim::detail::tls_thread); "
         "link kiln_sim into it and export its symbols (CMake ENABLE_EXPORTS, -rdynamic)");
}

}  // namespace

SimModule::SimModule(fs::path so_path) : path_(std::move(so_path)) {
  check_runtime_exported();
  handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) fail("simulator: cannot load {}: {}", path_.string(), dlerror());
}

SimModule::~SimModule() {
  if (handle_) dlclose(handle_);
}

SimEntry SimModule::entry(const std::string& name) const {
  void* p = dlsym(handle_, (name + "_sim").c_str());
  if (!p) fail("simulator: module {} has no kernel '{}'", path_.string(), name);
  return reinterpret_cast<SimEntry>(p);
}

void sim_launch(SimEntry entry, const kiln::sim::LaunchConfig& cfg, const std::vector<void*>& buffers,
                const std::vector<long long>& counts) {
  KILN_CHECK(buffers.size() == counts.size(), "sim_launch: {} buffers but {} counts", buffers.size(), counts.size());
  std::string error;
  int rc = entry(&cfg, buffers.data(), counts.data(), &error);
  if (rc == 1) throw kiln::sim::SimError(error);
  if (rc != 0) fail("simulator: kernel {}: {}", cfg.kernel, error);
}

SimCompiler::SimCompiler(fs::path cache_dir) : dir_((cache_dir.empty() ? default_dir() : cache_dir) / "sim") {
  command_ = fmt::format("{} -std=c++20 -O1 -fPIC -shared -w -DKILN_SIM -include {}/codegen/sim/cuda_sim.h -I{} -I{}",
                         KILN_SIM_CXX, KILN_SOURCE_DIR, KILN_SOURCE_DIR, KILN_SIM_CUDA_INCLUDE_DIR);
}

std::shared_ptr<SimModule> SimCompiler::build(const std::string& tu) {
  // The key: the command, the simulator headers the module is built against
  // (their ABI must match the runtime linked into this process), the source.
  std::string key = "kiln-sim-module-v1\n" + command_ + "\n";
  for (const char* h : {"codegen/sim/cuda_sim.h", "codegen/sim/sim_runtime.h", "codegen/sim/warp_mma.h"})
    key += read_file(fs::path(KILN_SOURCE_DIR) / h) + "\n";
  key += tu;
  const std::string stem = fmt::format("{:016x}", XXH64(key.data(), key.size(), 0));
  const fs::path so = dir_ / (stem + ".so"), key_path = dir_ / (stem + ".key");
  if (fs::exists(so) && fs::exists(key_path) && read_file(key_path) == key) {
    ++cache_hits_;
    return std::make_shared<SimModule>(so);
  }
  ++compilations_;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  static std::atomic<unsigned> seq{0};
  const std::string tmp = fmt::format("{}.build{}.{}", stem, ::getpid(), seq++);
  const fs::path src = dir_ / (tmp + ".cpp"), out = dir_ / (tmp + ".so"), log = dir_ / (tmp + ".log");
  if (!write_atomically(src, tu)) fail("simulator: cannot write {}", src.string());
  std::string cmd = fmt::format("{} -o {} {} > {} 2>&1", command_, quote(out.string()), quote(src.string()),
                                quote(log.string()));
  int rc = std::system(cmd.c_str());
  std::string output = read_file(log);
  fs::remove(src, ec);
  fs::remove(log, ec);
  if (rc != 0) {
    fs::remove(out, ec);
    fail("simulator: compiling a kernel module failed ({}):\n{}", cmd, output);
  }
  // Key first, then the module: a reader that sees the module sees its key
  // (a stale key only makes a miss).
  write_atomically(key_path, key);
  fs::rename(out, so, ec);
  if (ec) fail("simulator: cannot move {} to {}: {}", out.string(), so.string(), ec.message());
  return std::make_shared<SimModule>(so);
}

std::map<std::string, SimEntry> SimCompiler::compile(const std::vector<KernelSource>& kernels, int modules) {
  // Unique kernels by name (a name is the hash of its source).
  std::vector<const KernelSource*> uniq;
  std::map<std::string, const KernelSource*> by_name;
  for (const KernelSource& k : kernels) {
    auto [it, inserted] = by_name.emplace(k.name, &k);
    if (inserted) uniq.push_back(&k);
    else if (it->second->source != k.source) fail("simulator: two different kernels named '{}'", k.name);
  }
  std::map<std::string, SimEntry> entries;
  if (uniq.empty()) return entries;
  if (modules <= 0) modules = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  modules = std::min<int>(modules, static_cast<int>(uniq.size()));
  // Contiguous chunks: the same kernel list gives the same modules (cache hits).
  std::vector<std::string> tus(modules);
  std::vector<std::vector<const KernelSource*>> members(modules);
  for (size_t i = 0; i < uniq.size(); ++i) {
    size_t m = i * modules / uniq.size();
    tus[m] += uniq[i]->source + "\n";
    members[m].push_back(uniq[i]);
  }
  std::vector<std::shared_ptr<SimModule>> built(modules);
  std::vector<std::exception_ptr> errors(modules);
  std::vector<std::thread> pool;
  for (int m = 0; m < modules; ++m)
    pool.emplace_back([&, m] {
      try {
        built[m] = build(tus[m]);
      } catch (...) {
        errors[m] = std::current_exception();
      }
    });
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  for (int m = 0; m < modules; ++m) {
    for (const KernelSource* k : members[m]) entries[k->name] = built[m]->entry(k->name);
    loaded_.push_back(built[m]);
  }
  return entries;
}

}  // namespace kiln::codegen
