// The kernels of mma_kernels.cuh, as the host side sees them.
#pragma once
#include "backends/sim/sim_runtime.h"

namespace ks = kiln::sim;
void mma_m16n8k16_direct(ks::Ptr<const unsigned short> A, ks::Ptr<const unsigned short> B, ks::Ptr<const float> C,
                         ks::Ptr<float> D, int bf16);
void mma_m16n8k8_tf32_direct(ks::Ptr<const float> A, ks::Ptr<const float> B, ks::Ptr<const float> C, ks::Ptr<float> D,
                             int round);
void ldmatrix_raw(ks::Ptr<const unsigned short> M, ks::Ptr<unsigned> R, int mode);
void mma_via_ldmatrix(ks::Ptr<const unsigned short> A, ks::Ptr<const unsigned short> B, ks::Ptr<float> D, int bf16,
                      int b_mode);
void cp_async_groups(ks::Ptr<const float> src, ks::Ptr<float> early, ks::Ptr<float> pending, ks::Ptr<float> late,
                     int zfill_bytes, int src_offset);
void mma_tile_direct(ks::Ptr<const unsigned short> A, ks::Ptr<const unsigned short> B, ks::Ptr<const float> C,
                     ks::Ptr<float> D, int bf16);
