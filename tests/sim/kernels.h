// The test kernels of kernels.cu.cpp, as the host side sees them.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/sim/sim_runtime.h"

namespace ks = kiln::sim;
void barrier_rotate(ks::Ptr<int> out);
void row_max(ks::Ptr<const float> x, ks::Ptr<float> out, int cols);
void warp_ops(ks::Ptr<const int> x, ks::Ptr<int> xor_sum, ks::Ptr<int> down_sum, ks::Ptr<int> scan, ks::Ptr<int> bcast);
void votes(ks::Ptr<const float> x, ks::Ptr<unsigned> ballot, ks::Ptr<int> any, ks::Ptr<int> all);
void atomic_count(ks::Ptr<int> total, ks::Ptr<unsigned long long> wide, ks::Ptr<float> fsum, ks::Ptr<int> maxv);
void convert16(ks::Ptr<const float> x, ks::Ptr<unsigned short> h_bits, ks::Ptr<float> h_back,
               ks::Ptr<unsigned short> b_bits, ks::Ptr<float> b_back, int n);
void oob_write(ks::Ptr<float> out, int n);
void divergent_barrier(ks::Ptr<int> out);
void split_barriers(ks::Ptr<int> out);
void divergent_shuffle(ks::Ptr<int> out);
void transpose_tile(ks::Ptr<const float> in, ks::Ptr<float> out, int n);
void scale4(ks::Ptr<float> data, float s, int n4);
void deadlock(ks::Ptr<int> out);
void half_ops(ks::Ptr<const __half> x, ks::Ptr<__half> hsum, ks::Ptr<__nv_bfloat16> bmax, ks::Ptr<int> counts);
