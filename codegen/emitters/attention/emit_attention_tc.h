// The tensor-core variant of the attention kernel (codegen/emitters/attention/emit_attention.h),
// FlashAttention-2 style, for f16/bf16 operands with head dims that are
// multiples of 16 up to 128 (BERT/GPT-2/ViT's 64 and 128 among them).
// emit_attention() picks it whenever attention_tc_applies(); everything else
// (f32, f64, other head dims, no keys) keeps the SIMT kernel.
//
// Kernel (docs/codegen.md, "Attention kernels"): one block per (batch, head,
// tile of BQ = 16 * warps queries); each warp owns 16 query rows. The block
// stages its Q tile in shared memory once with cp.async and every warp keeps
// its rows' Q fragments in registers (ldmatrix). K and V stream through a
// double-buffered shared-memory pipeline in tiles of BK keys (cp.async,
// zero-filled past Sk; rows padded by 16 bytes so ldmatrix is free of bank
// conflicts): while tile j is multiplied, tile j + 1 is in flight. Per tile
// a warp computes S = Q K^T (mma.sync m16n8k16, f32 accumulators), scales it,
// adds the mask element and the causal -inf, and runs the online softmax on
// the accumulator fragments: a lane holds two rows (g, g + 8) of its 16, the
// row max is combined over the quad (lanes 4g..4g+3) with shuffles, alpha =
// exp(m_old - m_new) rescales the output accumulators and the lane's share of
// the row sum l, p = exp(s - m_new) in f32 is summed into l, rounded to
// f16/bf16 and packed straight into A fragments (the m16n8 accumulator layout
// of two adjacent key tiles is the m16k16 A layout), and O += P V is another
// mma with V fragments from ldmatrix.trans. The end: l summed over the quad,
// o / l (NaN, or 0 with nan_to_zero, for a row without a finite max) passed
// to the epilogue per element, as the SIMT kernel does.
#pragma once
#include <cstdint>
#include <vector>

#include "codegen/emitters/attention/attention_dims.h"
#include "codegen/emitters/attention/emit_attention.h"

namespace kiln::codegen {

// Whether the tensor-core kernel handles attention over these operands:
// f16/bf16, D and Dv multiples of 16 in [16, 128], at least one key and one
// output element (a symbolic dim counts as nonzero here: emit_attention
// checks the keys' smallest count).
bool attention_tc_applies(const TensorType& q, const TensorType& k, const TensorType& v);

// The kernel (attention_tc_applies must hold; shapes already validated by
// emit_attention, `dims` their sizes: static or shape-generic, attention_dims.h).
// `mask_strides` are the mask's strides broadcast to [B, H, Sq, Sk] (unused
// without a mask; symbolic dims in a generic kernel).
//
// Shape-generic: the tiles are chosen at the largest shapes; the keys are
// split per launch, in parts of a fixed number of key tiles that the cost
// model picks at the decode corner (fewest queries, most keys), so the split
// count is ceil(keys / (tiles per part * BK)), a grid axis of the symbols;
// the workspace and tile counters are planned for the largest shapes.
AttentionKernel emit_attention_tc(const TensorType& q, const TensorType& k, const TensorType& v,
                                  const AttentionDims& dims, bool has_mask, const std::vector<int64_t>& mask_strides,
                                  const AttrMap& attrs, const AttentionEpilogue& epi);

}  // namespace kiln::codegen
