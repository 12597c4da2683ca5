/* A stand-in for libnvrtc.so.13 laid out as the nvidia-cuda-nvrtc 13.0 wheel
 * lays it out: libnvrtc-builtins.so.13.0 sits in the same folder, which is not
 * on the dynamic loader's path. Real NVRTC opens its builtins by soname when
 * it compiles, so it finds them only if kiln preloaded them by absolute path
 * (codegen/nvrtc/nvrtc_library.cpp). This fake compiles nothing: its
 * nvrtcCompileProgram fails either way, with a log saying whether the
 * builtins were already loaded (tests/cli/nvrtc_builtins_test.sh). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef struct prog {
  const char* log;
} prog;

int nvrtcVersion(int* major, int* minor) {
  *major = 13;
  *minor = 0;
  return 0;
}

const char* nvrtcGetErrorString(int r) {
  return r == 7 ? "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE" : r == 6 ? "NVRTC_ERROR_COMPILATION" : "NVRTC_ERROR";
}

int nvrtcCreateProgram(prog** p, const char* src, const char* name, int n, const char* const* h,
                       const char* const* names) {
  (void)src, (void)name, (void)n, (void)h, (void)names;
  *p = calloc(1, sizeof(prog));
  return *p ? 0 : 1;
}

int nvrtcDestroyProgram(prog** p) {
  free(*p);
  *p = NULL;
  return 0;
}

int nvrtcCompileProgram(prog* p, int n, const char* const* options) {
  (void)n, (void)options;
  void* builtins = dlopen("libnvrtc-builtins.so.13.0", RTLD_NOW | RTLD_NOLOAD);
  if (!builtins) {
    p->log = "fake NVRTC: libnvrtc-builtins.so.13.0 is not loaded and not on the loader's path";
    return 7;
  }
  dlclose(builtins);
  p->log = "fake NVRTC: libnvrtc-builtins.so.13.0 was preloaded from NVRTC's folder; this fake compiles nothing";
  return 6;
}

int nvrtcGetProgramLogSize(prog* p, size_t* n) {
  *n = p->log ? strlen(p->log) + 1 : 1;
  return 0;
}

int nvrtcGetProgramLog(prog* p, char* out) {
  strcpy(out, p->log ? p->log : "");
  return 0;
}

int nvrtcGetCUBINSize(prog* p, size_t* n) {
  (void)p;
  *n = 0;
  return 1;
}
int nvrtcGetCUBIN(prog* p, char* out) {
  (void)p, (void)out;
  return 1;
}
int nvrtcGetPTXSize(prog* p, size_t* n) {
  (void)p;
  *n = 0;
  return 1;
}
int nvrtcGetPTX(prog* p, char* out) {
  (void)p, (void)out;
  return 1;
}
