#include "backends/sim/sim_module.h"

#include <dlfcn.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "codegen/launch_fit.h"
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
  static const bool ok = dlsym(RTLD_DEFAULT, "_ZN4kiln3sim6detail10tls_threadE") == &kiln::sim::detail::tls_thread &&
                         dlsym(RTLD_DEFAULT, "_ZN4kiln3sim8run_gridERKNS0_12LaunchConfigERKSt8functionIFvvEE") ==
                             reinterpret_cast<void*>(&kiln::sim::run_grid);
  if (!ok)
    fail(
        "simulator: this executable does not export the simulator runtime (kiln::sim::detail::tls_thread); "
        "link kiln_sim into it and export its symbols (CMake ENABLE_EXPORTS, -rdynamic)");
}

struct EmbeddedHeader {
  const char* path;  // relative to the include root, e.g. "backends/sim/cuda_sim.h"
  const char* text;
};
// backends/sim/*.h as they were at configure time (backends/sim/CMakeLists.txt).
constexpr EmbeddedHeader kSimHeaders[] = {
#include "sim_headers.inc"
};

std::string embedded_headers_text() {
  std::string all;
  for (const EmbeddedHeader& h : kSimHeaders) all += std::string(h.path) + "\n" + h.text + "\n";
  return all;
}

// Writes the embedded simulator headers under <dir>/include/<xxh64 of them>/
// (once; the name changes with the contents, so kiln builds of different
// versions sharing a cache never see each other's headers) and returns that
// include root.
fs::path materialize_headers(const fs::path& dir) {
  const std::string all = embedded_headers_text();
  const fs::path root = dir / "include" / fmt::format("{:016x}", XXH64(all.data(), all.size(), 0));
  for (const EmbeddedHeader& h : kSimHeaders) {
    const fs::path p = root / h.path;
    if (fs::exists(p) && read_file(p) == h.text) continue;
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (!write_atomically(p, h.text)) fail("simulator: cannot write the simulator header {}", p.string());
  }
  return root;
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

SimEntry SimModule::entry(const std::string& name, int params) const {
  void* p = dlsym(handle_, (name + "_sim").c_str());
  if (!p) fail("simulator: module {} has no kernel '{}'", path_.string(), name);
  return SimEntry(reinterpret_cast<SimEntry::Fn>(p), params);
}

void sim_launch(SimEntry entry, const kiln::sim::LaunchConfig& cfg, const std::vector<void*>& buffers,
                const std::vector<long long>& counts) {
  KILN_CHECK(entry.fn, "sim_launch: kernel {} has no simulator entry", cfg.kernel);
  KILN_CHECK(buffers.size() == counts.size(), "sim_launch: {} buffers but {} counts", buffers.size(), counts.size());
  // Fewer would have the entry read past `buffers`. More is how a node's
  // kernels share its bindings (a kernel may take a prefix of them: MaxUnpool's
  // zeroing kernel takes only the output), as a driver reads only the
  // parameters a kernel's image declares.
  if (entry.params >= 0 && buffers.size() < static_cast<size_t>(entry.params))
    fail("simulator: kernel {} takes {} buffer parameter(s), the launch passed only {}", cfg.kernel, entry.params,
         buffers.size());
  std::string error;
  int rc = entry.fn(&cfg, buffers.data(), counts.data(), &error);
  if (rc == 1) throw kiln::sim::SimError(error);
  if (rc != 0) fail("simulator: kernel {}: {}", cfg.kernel, error);
}

SimCompiler::SimCompiler(fs::path cache_dir) : dir_((cache_dir.empty() ? default_dir() : cache_dir) / "sim") {
  const fs::path root = materialize_headers(dir_);
  shim_ = root / "backends/sim/cuda_sim.h";
  flags_ = fmt::format("-std=c++20 -O1 -fPIC -w -DKILN_SIM -I{} -I{}", quote(root.string()),
                       quote(KILN_SIM_CUDA_INCLUDE_DIR));
  command_ = fmt::format("{} {} -shared -include {}", KILN_SIM_CXX, flags_, quote(shim_.string()));
}

// Parsing cuda_sim.h with the CUDA fp16/bf16 headers is most of a small
// module's compile time (about 85% on the dev machine), so the shim is
// precompiled once, next to it, with the modules' flags: GCC then uses
// cuda_sim.h.gch for `-include cuda_sim.h`. Built on the first cache miss
// only (a warm run never pays for it); a failed or stale PCH is not an error
// (GCC falls back to the header, which gives the same module).
void SimCompiler::ensure_precompiled_header() {
  std::call_once(pch_once_, [&] {
    fs::path gch = shim_;
    gch += ".gch";
    if (fs::exists(gch)) return;
    static std::atomic<unsigned> seq{0};
    fs::path tmp = gch;
    tmp += fmt::format(".tmp{}.{}", ::getpid(), seq++);
    const std::string cmd = fmt::format("{} {} -x c++-header -o {} {} > /dev/null 2>&1", KILN_SIM_CXX, flags_,
                                        quote(tmp.string()), quote(shim_.string()));
    std::error_code ec;
    if (std::system(cmd.c_str()) == 0) fs::rename(tmp, gch, ec);
    if (ec || fs::exists(tmp)) fs::remove(tmp, ec);
  });
}

std::shared_ptr<SimModule> SimCompiler::build(const std::string& tu) {
  // The key: the command, the simulator headers the module is built against
  // (their ABI must match the runtime linked into this process), the source.
  std::string key = "kiln-sim-module-v1\n" + command_ + "\n";
  key += embedded_headers_text();
  key += tu;
  const std::string stem = fmt::format("{:016x}", XXH64(key.data(), key.size(), 0));
  const fs::path so = dir_ / (stem + ".so"), key_path = dir_ / (stem + ".key");
  if (fs::exists(so) && fs::exists(key_path) && read_file(key_path) == key) {
    ++cache_hits_;
    return std::make_shared<SimModule>(so);
  }
  ++compilations_;
  ensure_precompiled_header();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  static std::atomic<unsigned> seq{0};
  const std::string tmp = fmt::format("{}.build{}.{}", stem, ::getpid(), seq++);
  const fs::path src = dir_ / (tmp + ".cpp"), out = dir_ / (tmp + ".so"), log = dir_ / (tmp + ".log");
  if (!write_atomically(src, tu)) fail("simulator: cannot write {}", src.string());
  std::string cmd =
      fmt::format("{} -o {} {} > {} 2>&1", command_, quote(out.string()), quote(src.string()), quote(log.string()));
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
    for (const KernelSource* k : members[m])
      entries[k->name] = built[m]->entry(k->name, kernel_param_count(k->source, k->name));
    loaded_.push_back(built[m]);
  }
  return entries;
}

}  // namespace kiln::codegen
