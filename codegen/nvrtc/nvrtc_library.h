// NVRTC loaded at run time (dlopen), as the runtime loads the CUDA driver:
// kiln, its Python module and apps that embed the compiler start on a machine
// without the CUDA toolkit, and only GPU code generation needs NVRTC. When it
// is missing, nvrtc_library() throws kiln::Error saying where it looked and
// how to install it; nothing falls back silently.
//
// Where it looks, first match wins:
//   1. $KILN_NVRTC_LIBRARY (a full path to libnvrtc.so.*): when set, the only
//      candidate
//   2. $CUDA_PATH/lib64, $CUDA_HOME/lib64
//   3. the nvidia-cuda-nvrtc wheel in a Python environment: $VIRTUAL_ENV, then
//      the project's .venv (source tree at build time)
//   4. the toolkit kiln was built against (its lib directory at configure time)
//   5. the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache)
//
// NVRTC loads libnvrtc-builtins.so.MAJOR.MINOR by soname while compiling; a
// wheel's folder is not on the loader's path, so the builtins next to the
// library found above are preloaded by absolute path first.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace kiln::codegen {

// NVRTC's C API, declared here so that kiln builds without nvrtc.h. The
// handle and result types match nvrtc.h (an opaque pointer, an int enum with
// NVRTC_SUCCESS == 0); these entry points are stable across NVRTC 11-13.
struct NvrtcLibrary {
  using Program = struct _nvrtcProgram*;
  using Result = int;
  static constexpr Result kSuccess = 0;

  std::string path;  // the file that was loaded
  int major = 0, minor = 0;
  // libnvrtc-builtins.so.* preloaded from NVRTC's own folder ("" when none
  // was there: NVRTC then finds its builtins through the loader).
  std::string builtins_path;

  Result (*Version)(int* major, int* minor) = nullptr;
  const char* (*GetErrorString)(Result) = nullptr;
  Result (*CreateProgram)(Program*, const char* src, const char* name, int n_headers, const char* const* headers,
                          const char* const* include_names) = nullptr;
  Result (*DestroyProgram)(Program*) = nullptr;
  Result (*CompileProgram)(Program, int n_options, const char* const* options) = nullptr;
  Result (*GetProgramLogSize)(Program, size_t*) = nullptr;
  Result (*GetProgramLog)(Program, char*) = nullptr;
  Result (*GetCUBINSize)(Program, size_t*) = nullptr;
  Result (*GetCUBIN)(Program, char*) = nullptr;
  Result (*GetPTXSize)(Program, size_t*) = nullptr;
  Result (*GetPTX)(Program, char*) = nullptr;
};

// The loaded library (loaded once per process; never unloaded). Throws
// kiln::Error when no usable NVRTC is found.
const NvrtcLibrary& nvrtc_library();

// True when NVRTC can be loaded; otherwise `why` (if given) says what was
// tried. Never throws: for `kiln doctor`-style reports and test skips.
bool nvrtc_available(std::string* why = nullptr);

// The candidate files, in search order (for messages and tests).
std::vector<std::string> nvrtc_search_paths();

}  // namespace kiln::codegen
