// Test kernels for codegen/core/mma.cuh's tensor-core device functions. This file
// is compiled twice: by the host compiler for the simulator (mma_kernels.cu.cpp
// includes the shim and codegen/core/mma.cuh first) and by NVRTC for sm_80/sm_90
// (mma_test.cpp prepends kiln's kernel prelude and mma.cuh), so it includes
// nothing itself.
//
// Fragments are loaded and stored with the layouts exactly as the PTX ISA
// writes them ("Matrix Fragments for mma.m16n8k16 with floating point type",
// "... for mma.m16n8k8"), element by element, so a simulator that placed an
// element in another lane or register gives a wrong product.

// One m16n8k16 product per warp: D = A (16x16) B (16x8) + C; 16-bit operands
// as their bit patterns, A and B row-major, warp w at offsets w*256 / w*128.
__global__ void mma_m16n8k16_direct(KILN_PTR(const unsigned short) A, KILN_PTR(const unsigned short) B,
                                    KILN_PTR(const float) C, KILN_PTR(float) D, int bf16) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int groupID = lane >> 2, threadID_in_group = lane % 4;
  A += warp * 256;
  B += warp * 128;
  C += warp * 128;
  D += warp * 128;
  unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4], d[4];
  for (int i = 0; i < 8; ++i) {  // a0..a7, two per register, low half first
    const int row = (i < 2 || (i >= 4 && i < 6)) ? groupID : groupID + 8;
    const int col = threadID_in_group * 2 + (i & 0x1) + (i >= 4 ? 8 : 0);
    a[i / 2] |= static_cast<unsigned>(A[row * 16 + col]) << (16 * (i & 1));
  }
  for (int i = 0; i < 4; ++i) {  // b0..b3
    const int row = threadID_in_group * 2 + (i & 0x1) + (i >= 2 ? 8 : 0);
    const int col = groupID;
    b[i / 2] |= static_cast<unsigned>(B[row * 8 + col]) << (16 * (i & 1));
  }
  for (int i = 0; i < 4; ++i) {  // c0..c3
    const int row = i < 2 ? groupID : groupID + 8;
    const int col = threadID_in_group * 2 + (i & 0x1);
    c[i] = C[row * 8 + col];
  }
  if (bf16)
    kiln_mma_m16n8k16_bf16(d, a, b, c);
  else
    kiln_mma_m16n8k16_f16(d, a, b, c);
  for (int i = 0; i < 4; ++i) {
    const int row = i < 2 ? groupID : groupID + 8;
    const int col = threadID_in_group * 2 + (i & 0x1);
    D[row * 8 + col] = d[i];
  }
}

// One m16n8k8 tf32 product per warp: D = A (16x8) B (8x8) + C, f32 inputs as
// given (round = 0: their bits, the low 13 mantissa bits ignored) or rounded
// by kiln_f32_to_tf32 (round = 1).
__global__ void mma_m16n8k8_tf32_direct(KILN_PTR(const float) A, KILN_PTR(const float) B, KILN_PTR(const float) C,
                                        KILN_PTR(float) D, int round) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int groupID = lane >> 2, threadID_in_group = lane % 4;
  A += warp * 128;
  B += warp * 64;
  C += warp * 128;
  D += warp * 128;
  unsigned a[4], b[2];
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) {
    const int row = (i == 0 || i == 2) ? groupID : groupID + 8;
    const int col = i < 2 ? threadID_in_group : threadID_in_group + 4;
    const float v = A[row * 8 + col];
    a[i] = round ? kiln_f32_to_tf32(v) : __float_as_uint(v);
  }
  for (int i = 0; i < 2; ++i) {
    const int row = i == 0 ? threadID_in_group : threadID_in_group + 4;
    const int col = groupID;
    const float v = B[row * 8 + col];
    b[i] = round ? kiln_f32_to_tf32(v) : __float_as_uint(v);
  }
  for (int i = 0; i < 4; ++i) {
    const int row = i < 2 ? groupID : groupID + 8;
    const int col = threadID_in_group * 2 + (i & 0x1);
    c[i] = C[row * 8 + col];
  }
  kiln_mma_m16n8k8_tf32(d, a, b, c);
  for (int i = 0; i < 4; ++i) {
    const int row = i < 2 ? groupID : groupID + 8;
    const int col = threadID_in_group * 2 + (i & 0x1);
    D[row * 8 + col] = d[i];
  }
}

// ldmatrix alone: four 8x8 matrices of 16-bit values (M, matrix-major, rows
// of 8) are staged in shared memory with rows 24 elements apart; the warp
// loads them with form `mode` (0: x4, 1: x4.trans, 2: x2, 3: x2.trans) and
// every lane stores its registers: R[lane * 4 + m].
__global__ void ldmatrix_raw(KILN_PTR(const unsigned short) M, KILN_PTR(unsigned) R, int mode) {
  KILN_DYNAMIC_SHARED(unsigned short, s);
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) s[(i / 8) * 24 + i % 8] = M[i];  // row i/8 = matrix (i/64), row (i/8)%8
  __syncthreads();
  unsigned r[4] = {0, 0, 0, 0};
  // Lane 8*m + j gives row j of matrix m.
  if (mode == 0) kiln_ldmatrix_x4(r, s + lane * 24);
  if (mode == 1) kiln_ldmatrix_x4_trans(r, s + lane * 24);
  if (mode == 2 || mode == 3) {
    unsigned r2[2];
    if (mode == 2)
      kiln_ldmatrix_x2(r2, s + (lane % 16) * 24);
    else
      kiln_ldmatrix_x2_trans(r2, s + (lane % 16) * 24);
    r[0] = r2[0];
    r[1] = r2[1];
  }
  for (int m = 0; m < 4; ++m) R[lane * 4 + m] = r[m];
}

// D (16x16) = A (16x16) B (16x16) with fragments from shared memory: A
// row-major through ldmatrix.x4; B (row-major K x N in global) staged as
// [n][k] for the plain forms (b_mode 0: x4, 2: x2) or as [k][n] for the
// transposing forms (1: x4.trans, 3: x2.trans). Two m16n8k16 products.
__global__ void mma_via_ldmatrix(KILN_PTR(const unsigned short) A, KILN_PTR(const unsigned short) B, KILN_PTR(float) D,
                                 int bf16, int b_mode) {
  KILN_DYNAMIC_SHARED(unsigned short, s);
  const int lane = threadIdx.x;
  const int lda = 24, ldb = 24;  // padded rows: 48 bytes, 16-byte aligned
  KILN_PTR(unsigned short) As = s;
  KILN_PTR(unsigned short) Bs = s + 16 * lda;
  const bool trans = b_mode == 1 || b_mode == 3;
  for (int i = lane; i < 256; i += 32) {
    const int r = i / 16, c = i % 16;
    As[r * lda + c] = A[i];
    if (trans)
      Bs[r * ldb + c] = B[i];  // [k][n]
    else
      Bs[c * ldb + r] = B[i];  // [n][k]
  }
  __syncthreads();
  unsigned a[4], b[2][2];
  kiln_ldmatrix_x4(a, As + (lane % 16) * lda + (lane / 16) * 8);
  if (b_mode == 0) {  // matrices: (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7) (n8-15,k8-15)
    unsigned r[4];
    kiln_ldmatrix_x4(r, Bs + ((lane % 8) + (lane / 16) * 8) * ldb + ((lane / 8) % 2) * 8);
    b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
  } else if (b_mode == 1) {  // matrices: (k0-7,n0-7) (k8-15,n0-7) (k0-7,n8-15) (k8-15,n8-15), transposed
    unsigned r[4];
    kiln_ldmatrix_x4_trans(r, Bs + ((lane % 8) + ((lane / 8) % 2) * 8) * ldb + (lane / 16) * 8);
    b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
  } else {
    for (int nt = 0; nt < 2; ++nt) {
      if (b_mode == 2)
        kiln_ldmatrix_x2(b[nt], Bs + (nt * 8 + lane % 8) * ldb + ((lane / 8) % 2) * 8);
      else
        kiln_ldmatrix_x2_trans(b[nt], Bs + (lane % 16) * ldb + nt * 8);
    }
  }
  const int groupID = lane >> 2, threadID_in_group = lane % 4;
  for (int nt = 0; nt < 2; ++nt) {
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    if (bf16)
      kiln_mma_m16n8k16_bf16(d, a, b[nt], d);
    else
      kiln_mma_m16n8k16_f16(d, a, b[nt], d);
    for (int i = 0; i < 4; ++i) {
      const int row = i < 2 ? groupID : groupID + 8;
      const int col = nt * 8 + threadID_in_group * 2 + (i & 0x1);
      D[row * 16 + col] = d[i];
    }
  }
}

// cp.async groups: each of 32 threads copies 16 bytes (4 floats) into each of
// three shared buffers, one commit group per buffer; the third copies only
// `zfill_bytes` bytes and zero-fills the rest. After wait_group 2 the first
// group has landed (`early`: buffer 0, and buffer 1 as it was then:
// `pending`); after wait_group 0 all have (`late`: buffers 1 and 2).
__global__ void cp_async_groups(KILN_PTR(const float) src, KILN_PTR(float) early, KILN_PTR(float) pending,
                                KILN_PTR(float) late, int zfill_bytes, int src_offset) {
  KILN_DYNAMIC_SHARED(float, s);
  const int t = threadIdx.x;
  for (int i = 0; i < 12; ++i) s[t * 12 + i] = -1.0f;
  __syncthreads();
  for (int g = 0; g < 3; ++g) {
    if (g < 2)
      kiln_cp_async16(s + g * 128 + t * 4, src + src_offset + g * 128 + t * 4);
    else
      kiln_cp_async16_zfill(s + g * 128 + t * 4, src + src_offset + g * 128 + t * 4, zfill_bytes);
    kiln_cp_async_commit();
  }
  kiln_cp_async_wait<2>();
  for (int i = 0; i < 4; ++i) {
    early[t * 4 + i] = s[t * 4 + i];
    pending[t * 4 + i] = s[128 + t * 4 + i];
  }
  kiln_cp_async_wait<0>();
  for (int i = 0; i < 8; ++i) late[t * 8 + i] = s[128 + (i / 4) * 128 + t * 4 + i % 4];
}

// kiln_mma_tile<2, 3>: D (32x24) = A (32x16) B (16x24) + C, six m16n8k16
// products in one call; fragments loaded per lane by the same formulas.
__global__ void mma_tile_direct(KILN_PTR(const unsigned short) A, KILN_PTR(const unsigned short) B,
                                KILN_PTR(const float) C, KILN_PTR(float) D, int bf16) {
  const int lane = threadIdx.x % 32;
  const int groupID = lane >> 2, threadID_in_group = lane % 4;
  unsigned a[2][4], b[3][2];
  float acc[2][3][4];
  for (int mi = 0; mi < 2; ++mi) {
    for (int r = 0; r < 4; ++r) a[mi][r] = 0;
    for (int i = 0; i < 8; ++i) {
      const int row = mi * 16 + ((i < 2 || (i >= 4 && i < 6)) ? groupID : groupID + 8);
      const int col = threadID_in_group * 2 + (i & 0x1) + (i >= 4 ? 8 : 0);
      a[mi][i / 2] |= static_cast<unsigned>(A[row * 16 + col]) << (16 * (i & 1));
    }
  }
  for (int ni = 0; ni < 3; ++ni) {
    b[ni][0] = b[ni][1] = 0;
    for (int i = 0; i < 4; ++i) {
      const int row = threadID_in_group * 2 + (i & 0x1) + (i >= 2 ? 8 : 0);
      const int col = ni * 8 + groupID;
      b[ni][i / 2] |= static_cast<unsigned>(B[row * 24 + col]) << (16 * (i & 1));
    }
  }
  for (int mi = 0; mi < 2; ++mi)
    for (int ni = 0; ni < 3; ++ni)
      for (int i = 0; i < 4; ++i)
        acc[mi][ni][i] = C[(mi * 16 + (i < 2 ? groupID : groupID + 8)) * 24 + ni * 8 + threadID_in_group * 2 + (i & 1)];
  if (bf16)
    kiln_mma_tile_bf16<2, 3>(acc, a, b);
  else
    kiln_mma_tile_f16<2, 3>(acc, a, b);
  for (int mi = 0; mi < 2; ++mi)
    for (int ni = 0; ni < 3; ++ni)
      for (int i = 0; i < 4; ++i)
        D[(mi * 16 + (i < 2 ? groupID : groupID + 8)) * 24 + ni * 8 + threadID_in_group * 2 + (i & 1)] = acc[mi][ni][i];
}
