#include "ops/blas_library.h"

#include <dlfcn.h>

#include "ir/error.h"

namespace kiln::blas {

namespace {

struct Library {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
};

// The shared library found at configure time, by its soname (KILN_BLAS_SONAME).
const Library& library() {
  static const Library lib = [] {
    void* h = dlopen(KILN_BLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      fail(
          "reference backend: cannot load the BLAS library {} for GEMM and conv ({}); install it (Debian: "
          "libopenblas0)",
          KILN_BLAS_SONAME, why ? why : "no reason given");
    }
    Library l;
    l.sgemm = reinterpret_cast<decltype(&cblas_sgemm)>(dlsym(h, "cblas_sgemm"));
    l.dgemm = reinterpret_cast<decltype(&cblas_dgemm)>(dlsym(h, "cblas_dgemm"));
    if (!l.sgemm || !l.dgemm)
      fail("reference backend: the BLAS library {} has no cblas_sgemm / cblas_dgemm", KILN_BLAS_SONAME);
    return l;
  }();
  return lib;
}

}  // namespace

decltype(&cblas_sgemm) sgemm() { return library().sgemm; }
decltype(&cblas_dgemm) dgemm() { return library().dgemm; }

}  // namespace kiln::blas
