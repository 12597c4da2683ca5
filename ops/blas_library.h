// The BLAS behind the reference backend's large GEMM and conv (OpenBLAS),
// loaded on the first call rather than linked.
//
// Why: OpenBLAS starts its thread pool when the library is loaded, before
// main, and its threads spin for about 0.1 s of CPU waiting for work. Every
// kiln process paid that, although most (`kiln compile`, `inspect`, the plan
// runtime) never multiply a matrix on the CPU; on the 2-core machine the
// spinning thread took a core from the compile itself (issue 18: the compile
// scaling's wall and CPU times). Loaded here on first use, only processes
// that run a reference GEMM start it.
#pragma once
#include <cblas.h>

namespace kiln::blas {

// cblas_sgemm / cblas_dgemm of the loaded library (loaded on the first call,
// thread-safe). A missing library is a kiln::Error naming it.
decltype(&cblas_sgemm) sgemm();
decltype(&cblas_dgemm) dgemm();

}  // namespace kiln::blas
