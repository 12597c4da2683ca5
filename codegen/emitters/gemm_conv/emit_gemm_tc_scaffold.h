// What the two standalone tensor-core GEMM emitters share: emit_gemm_tc
// (mma.sync, emit_gemm_tc.cpp) and emit_gemm_wgmma (sm_90a warpgroup MMA,
// emit_gemm_wgmma.cpp) take the same GemmTcSpec, launch the same way and hand
// the epilogue hook and the simulator the same parameters; only the main loop
// differs. Everything around it is here once, so the two cannot drift apart:
// the spec's checks, the default tile, the grid, the epilogue's parameters,
// the simulator entry, and naming the kernel by the hash of its text.
// Internal to codegen/emitters/gemm_conv.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "codegen/emitters/gemm_conv/emit_gemm_tc.h"

namespace kiln::codegen {

// The checked spec: its kernel label and A's / B's batch strides (the
// defaults resolved). `what` names the kernel in messages ("tensor-core
// GEMM", "wgmma GEMM").
struct TcGemmFrame {
  std::string label;
  int64_t a_stride = 0, b_stride = 0;
};
TcGemmFrame check_tc_gemm_spec(const GemmTcSpec& s, std::string_view what);

// The default tile: 128 x 128 unless that leaves an H100 with less than one
// wave of blocks; then N, then M halves to 64. The spec's override wins.
void default_tc_tile(const GemmTcSpec& s, int* bm, int* bn);

// The grid (x: N tiles, y: M tiles, z: batch) and the buffer counts (out, a,
// b) of a bm x bn tile; more than 65535 tiles along M or N is unsupported.
void tc_grid_and_counts(const GemmTcSpec& s, const TcGemmFrame& f, int bm, int bn, GemmTcKernel& k);

// The epilogue's kernel parameters (", KILN_PTR(const T) e0, ..."), its
// arguments (", e0, ...") and its code (the spec's, or the default store).
struct TcEpilogueText {
  std::string params, args, code;
};
TcEpilogueText tc_epilogue_text(const GemmTcSpec& s, const std::string& label);

// `kernel` with the text both kernels share put in for its keys
// @TC_KERNEL_HEAD@ (the epilogue's namespace, the signature, the sizes and
// tile as constants), @TC_BLOCK_ORIGIN@ (the block's m0, n0 and batch, the
// operands advanced to it, `zero`) and @TC_PIPELINE_FILL@ (the cp.async ring
// filled with STAGES - 1 tiles, then the k-loop's head up to the wait for
// tile kt). Its other @KEY@s are left for substitute().
std::string with_tc_kernel_pieces(std::string_view kernel);

// The template keys both kernels fill alike: NAME (kept as @NAME@ for
// finish_tc_kernel), M, N, K, BM, BN, BK, STAGES, THREADS, T, TOUT, A_BSTRIDE,
// B_BSTRIDE, ZERO, EXTRA_PARAMS, EXTRA_ARGS and EPILOGUE (kept as
// `epilogue_slot`: the epilogue is user code, put in after the hash).
std::map<std::string, std::string> tc_common_vars(const GemmTcSpec& s, const TcGemmFrame& f, const GemmTcKernel& k,
                                                  const TcEpilogueText& ep, std::string_view epilogue_slot);

// Replaces every @KEY@ of `text` by vars[KEY]; an unknown or unterminated key
// is an internal error. One pass: '@' inside a value is kept.
std::string substitute(std::string_view text, const std::map<std::string, std::string>& vars);

// The simulator entry (backends/sim/sim_module.h) of the kernel @NAME@: out,
// a, b, then the epilogue operands.
std::string tc_sim_entry(const GemmTcSpec& s);

// Names the kernel `prefix`_<label>_<hash of body + epilogue>, writes the name
// for @NAME@ and the epilogue (user code, substituted last so an '@' in it is
// kept) at `epilogue_slot`, and sets k.source to the fp16/bf16 includes the
// dtypes need, `preludes` and the named body; the epilogue operands' counts go
// after k.counts.
void finish_tc_kernel(const GemmTcSpec& s, const std::string& label, std::string_view prefix, const std::string& body,
                      const std::string& epilogue, std::string_view epilogue_slot, const std::string& preludes,
                      GemmTcKernel& k);

}  // namespace kiln::codegen
