// Private to conv_ops.cpp and deform_col2im_ops.cpp: the conv family's
// parameters and the reference kernels' shared pieces (BLAS GEMM, col2im, bias).
#pragma once
#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/nn_internal.h"

namespace kiln::ops::nn {

struct ConvParams {
  int nd = 0;
  int64_t N = 0, C = 0, M = 0, group = 1;
  int64_t Cg = 0, Mg = 0;           // channels per group: input, output
  std::vector<int64_t> in, k, out;  // spatial dims (for conv_transpose: in = its input, out = its output)
  std::vector<int64_t> strides, dilations, pads, output_padding;
  int64_t in_size = 0, k_size = 0, out_size = 0;
};

// Checks shapes and attributes and computes the output shape. Used by both
// inference and the kernels (errors carry the node label).
ConvParams conv_params(const AttrMap& a, const Shape& xs, const Shape& ws, const Shape* bs, bool transpose,
                       const std::string& label);

// C = op(A) * op(B), row-major, through BLAS.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
          float* C, int64_t ldc);
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* A, int64_t lda, const double* B, int64_t ldb,
          double* C, int64_t ldc);

void check_blas_dims(const std::string& label, std::initializer_list<int64_t> dims);

// Adds columns back into one group's output (conv_transpose): row (m,
// kernel position), column = input position i, lands at i*stride - pad + k*dil.
template <typename T>
void col2im(const T* col, const ConvParams& p, T* y) {
  const int nd = p.nd;
  const std::vector<int64_t> ostr = row_strides(p.out);
  const int64_t in_last = p.in[nd - 1], out_last = p.out[nd - 1], s_last = p.strides[nd - 1];
  const int64_t outer = p.in_size / in_last;
  std::vector<int64_t> kidx(nd, 0), koff(nd), i(nd, 0);
  for (int64_t m = 0; m < p.Mg; ++m) {
    T* ym = y + m * p.out_size;
    std::fill(kidx.begin(), kidx.end(), 0);
    for (int64_t kp = 0; kp < p.k_size; ++kp, next_index(kidx, p.k)) {
      for (int d = 0; d < nd; ++d) koff[d] = kidx[d] * p.dilations[d] - p.pads[d];
      const T* src = col + (m * p.k_size + kp) * p.in_size;
      std::fill(i.begin(), i.end(), 0);
      for (int64_t ii = 0; ii < outer; ++ii) {
        bool valid = true;
        int64_t base = 0;
        for (int d = 0; d < nd - 1; ++d) {
          int64_t oy = i[d] * p.strides[d] + koff[d];
          if (oy < 0 || oy >= p.out[d]) valid = false;
          base += oy * ostr[d];
        }
        if (valid) {
          const T* row = src + ii * in_last;
          int64_t oy = koff[nd - 1];
          for (int64_t il = 0; il < in_last; ++il, oy += s_last)
            if (oy >= 0 && oy < out_last) ym[base + oy] += row[il];
        }
        for (int d = nd - 2; d >= 0; --d) {
          if (++i[d] < p.in[d]) break;
          i[d] = 0;
        }
      }
    }
  }
}

template <typename T>
void add_bias(T* y, const T* b, int64_t N, int64_t M, int64_t spatial) {
  if (!b) return;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      T* p = y + (n * M + m) * spatial;
      for (int64_t j = 0; j < spatial; ++j) p[j] += b[m];
    }
}

// The attributes conv, conv_transpose and deform_conv share.
std::vector<AttrSpec> conv_attrs(bool transpose);

// deform_conv and col2im (deform_col2im_ops.cpp), registered by register_conv_ops.
OpDef deform_conv_def();
OpDef col2im_def();

}  // namespace kiln::ops::nn
