#include "codegen/nvrtc/nvrtc_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "ir/error.h"

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;

// The NVRTC major version kiln's kernels and options are written for.
constexpr const char* kSoname = "libnvrtc.so.13";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// site-packages/nvidia/cuda_nvrtc/lib (CUDA 12 wheels) and
// site-packages/nvidia/cu13/lib (CUDA 13 wheels) under a Python environment.
void add_wheel_dirs(const fs::path& venv, std::vector<std::string>& out) {
  std::error_code ec;
  const fs::path lib = venv / "lib";
  if (!fs::is_directory(lib, ec)) return;
  for (const auto& py : fs::directory_iterator(lib, ec)) {
    const fs::path nv = py.path() / "site-packages" / "nvidia";
    for (const char* sub : {"cu13/lib", "cuda_nvrtc/lib"}) {
      const fs::path f = nv / sub / kSoname;
      if (fs::exists(f, ec)) out.push_back(f.string());
    }
  }
}

// NVRTC opens libnvrtc-builtins.so.MAJOR.MINOR by soname when it compiles.
// The nvidia-cuda-nvrtc wheel puts it next to libnvrtc.so.13, in a folder the
// dynamic loader does not search, so it is loaded here first, by absolute
// path: the loader then resolves NVRTC's soname lookup to the library already
// loaded. Returns the file loaded ("" when NVRTC came from the loader's own
// search, or its folder has no builtins: then NVRTC finds them as usual).
std::string preload_builtins(const std::string& nvrtc_path, int major, int minor) {
  const fs::path lib(nvrtc_path);
  if (!lib.has_parent_path()) return "";
  const fs::path dir = lib.parent_path();
  std::error_code ec;
  std::vector<fs::path> candidates{dir / fmt::format("libnvrtc-builtins.so.{}.{}", major, minor)};
  // Another minor of the same major (a wheel whose minor differs from the
  // library's report), newest name first.
  std::vector<fs::path> others;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(fmt::format("libnvrtc-builtins.so.{}.", major), 0) == 0) others.push_back(e.path());
  }
  std::sort(others.rbegin(), others.rend());
  candidates.insert(candidates.end(), others.begin(), others.end());
  for (const fs::path& c : candidates) {
    if (!fs::exists(c, ec)) continue;
    // Never dlclose'd, as NVRTC itself.
    if (dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL)) return c.string();
  }
  return "";
}

struct Loaded {
  NvrtcLibrary lib;
  bool ok = false;
  std::string why;
};

template <typename F>
bool sym(void* h, F& fn, const char* name, std::string& why) {
  fn = reinterpret_cast<F>(dlsym(h, name));
  if (!fn) why = fmt::format("has no {}", name);
  return fn != nullptr;
}

bool bind(void* h, NvrtcLibrary& l, std::string& why) {
  return sym(h, l.Version, "nvrtcVersion", why) && sym(h, l.GetErrorString, "nvrtcGetErrorString", why) &&
         sym(h, l.CreateProgram, "nvrtcCreateProgram", why) && sym(h, l.DestroyProgram, "nvrtcDestroyProgram", why) &&
         sym(h, l.CompileProgram, "nvrtcCompileProgram", why) &&
         sym(h, l.GetProgramLogSize, "nvrtcGetProgramLogSize", why) &&
         sym(h, l.GetProgramLog, "nvrtcGetProgramLog", why) && sym(h, l.GetCUBINSize, "nvrtcGetCUBINSize", why) &&
         sym(h, l.GetCUBIN, "nvrtcGetCUBIN", why) && sym(h, l.GetPTXSize, "nvrtcGetPTXSize", why) &&
         sym(h, l.GetPTX, "nvrtcGetPTX", why);
}

Loaded load() {
  Loaded out;
  std::vector<std::string> tried;
  for (const std::string& path : nvrtc_search_paths()) {
    // Never dlclose'd: NVRTC stays for the process's life.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      // A bare soname that the loader cannot find is the common case; a full
      // path that exists but fails to load is worth its own message.
      tried.push_back(fmt::format("{} ({})", path, e ? e : "dlopen failed"));
      continue;
    }
    std::string why;
    NvrtcLibrary l;
    l.path = path;
    if (!bind(h, l, why) || l.Version(&l.major, &l.minor) != NvrtcLibrary::kSuccess) {
      tried.push_back(fmt::format("{} ({})", path, why.empty() ? "nvrtcVersion failed" : why));
      continue;
    }
    l.builtins_path = preload_builtins(path, l.major, l.minor);
    out.lib = l;
    out.ok = true;
    return out;
  }
  std::string list;
  for (const auto& t : tried) list += "\n  " + t;
  out.why = fmt::format(
      "GPU code generation needs NVRTC ({}), which was not found; tried:{}\n"
      "Install the CUDA 13 toolkit, or the nvidia-cuda-nvrtc wheel into the project's .venv "
      "(.venv/bin/pip install nvidia-cuda-nvrtc), or set KILN_NVRTC_LIBRARY to the library's path.",
      kSoname, list);
  return out;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

std::vector<std::string> nvrtc_search_paths() {
  std::vector<std::string> out;
  // An explicit choice is the only candidate: falling back to another NVRTC
  // would silently compile with a library the user did not ask for.
  if (std::string p = env("KILN_NVRTC_LIBRARY"); !p.empty()) return {p};
  for (const char* var : {"CUDA_PATH", "CUDA_HOME"})
    if (std::string root = env(var); !root.empty()) out.push_back((fs::path(root) / "lib64" / kSoname).string());
  if (std::string venv = env("VIRTUAL_ENV"); !venv.empty()) add_wheel_dirs(venv, out);
#ifdef KILN_SOURCE_DIR
  add_wheel_dirs(fs::path(KILN_SOURCE_DIR) / ".venv", out);
#endif
#ifdef KILN_NVRTC_BUILD_DIR
  out.push_back((fs::path(KILN_NVRTC_BUILD_DIR) / kSoname).string());
#endif
  out.push_back(kSoname);
  return out;
}

const NvrtcLibrary& nvrtc_library() {
  const Loaded& l = loaded();
  if (!l.ok) throw Error(l.why);
  return l.lib;
}

bool nvrtc_available(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok && why) *why = l.why;
  return l.ok;
}

}  // namespace kiln::codegen
