// The attention emitter: softmax(scale * q k^T + mask) v (ops/attention_ops.cpp)
// as one FlashAttention-style kernel, and the fused kind "attention"
// (docs/fusion.md: the attention op followed by an epilogue of transposes,
// reshapes, casts and pointwise ops) as the same kernel storing each output
// element through the epilogue.
//
// Kernel (docs/codegen.md, "Attention kernels"): one block per (batch, head,
// tile of BQ queries); TPR adjacent lanes per query row (row r = threadIdx.x /
// TPR). The block stages its Q tile in shared memory once, then streams K and
// V through shared memory in tiles of BK keys: each lane computes the scores
// of its row for keys t, t + TPR, ... of the tile (dot product over D in the
// compute type, times scale, plus the mask element, -inf where causal hides
// the key); the row's tile max is combined over its lanes by shuffles; the
// online softmax rescales the running sum l and the output share (dims t,
// t + TPR, ... of Dv, in registers) by exp(m_old - m_new); each lane turns its
// own scores into p = exp(s - m_new) once, and after a __syncwarp every lane
// adds p * v over the tile. No [Sq, Sk] matrix exists anywhere; the result
// is o / l (l summed over the row's lanes).
// f16/bf16 operands with head dims that are multiples of 16 up to 128 get
// the tensor-core kernel of codegen/emitters/attention/emit_attention_tc.h instead (same
// semantics, same epilogue hook).
// Compute type: float for f16/bf16/f32 (as the reference), double for f64.
// Rows whose final max is not finite (a NaN score, all keys masked, a +inf
// score) are NaN, or 0 with nan_to_zero, as the reference's softmax gives.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/core/kernel_params.h"
#include "codegen/core/size_expr.h"
#include "ir/attribute.h"
#include "ir/graph.h"
#include "ir/symbolic_dim.h"
#include "ir/tensor.h"

namespace kiln::codegen {

struct AttentionKernel {
  std::string name;    // kiln_attn_<label>_<16 hex digits of the source's hash>
  std::string source;  // complete translation unit
  // Launch (docs/codegen.md): grid = B * H * ceil(Sq / BQ) (0: empty output),
  // block = BQ * TPR (tensor cores: 32 * warps); shared memory is static
  // (<= 48 KiB).
  unsigned grid = 0;
  unsigned block = 0;
  int bq = 0, bk = 0, tpr = 0;  // the tiling chosen (tpr: SIMT kernel only)
  int warps = 0;                // tensor-core kernel: warps per block (16 queries each)
  bool tensor_cores = false;    // the mma kernel of codegen/emitters/attention/emit_attention_tc.h
  size_t shared_bytes = 0;      // static shared memory the kernel declares
  // Split-KV (flash-decoding, tensor-core kernel only; docs/codegen.md,
  // "Attention kernels"): the keys of each (batch, head, query tile) are
  // divided among this many blocks, each writing its rows' partial softmax
  // state (max, sum, unnormalized output) to an f32 workspace; the last block
  // of the tile to finish (a ticket from a per-tile counter) combines them in
  // split order and runs the epilogue. 1: no split.
  int kv_splits = 1;
  int64_t workspace_f32 = 0;  // scratch after the buffers (NodeKernel::workspace_f32)
  int64_t tile_counters = 0;  // zeroed u32 counters after the scratch (NodeKernel::tile_counters)
  // Shape-generic (codegen/emitters/attention/attention_dims.h): the symbols
  // the kernel's last parameter `kiln_syms ks` holds (empty: a static
  // kernel), and its grid per axis as a function of them (x: batch * heads,
  // y: query tiles, z: key splits); `grid` is then 1. The workspace and the
  // tile counters are sized at the largest shapes.
  std::vector<std::string> generic_symbols;
  GridAxisExpr grid_axes[3];
};

// What happens to each attention output element: `code` is statements that
// read `val` (the element in the compute type: float, or double for f64) and
// `lin` (long long, its row-major index in [B, H, Sq, Dv]) and store it to
// the results. `params` is the kernel's parameter list, `sim_entry` its
// simulator entry (with @NAME@ for the kernel's name), `dtypes` the dtypes
// of its buffers; `q`, `k`, `v`, `mask` name the parameters holding the
// attention's operands (mask empty: none). A fused node's epilogue comes
// from the shared epilogue emitter (codegen/emitters/gemm_conv/emit_epilogue.h).
struct AttentionEpilogue {
  std::string params;
  std::string sim_entry;
  std::vector<DType> dtypes;
  std::string q, k, v, mask;
  std::string code;
  std::string helpers;  // device code placed before the kernel
  std::string label;
  // For a split-KV kernel: the simulator entry binding, after the buffers
  // above, the f32 workspace `ws` and the u32 counters `tickets`; and which
  // buffer positions hold q, k, v and the mask (the model counts the k-loop's
  // bytes from those, the combine's from the others: "// buffers:" lines,
  // perf/plan_work.cpp), of `buffer_count` buffers before the workspace.
  std::string sim_entry_split;
  std::vector<int> operand_buffers;
  int buffer_count = 0;
  // The symbols' ranges, for operands with symbolic dims (a plan with shape
  // profiles): the kernel is then shape-generic and the simulator entries
  // above pass a kiln_syms after the buffers (and after ws, tickets).
  SymbolBindings sym_min, sym_max;
};

// The kernel for attention over q [B,H,Sq,D], k [B,H,Sk,D], v [B,H,Sk,Dv],
// mask (of q's dtype, broadcast to [B,H,Sq,Sk]; empty shape and
// has_mask=false: none), attributes scale / causal / nan_to_zero, storing
// through `epi`. Throws kiln::Error for inconsistent types, kiln::Unsupported
// when even the smallest tiles exceed 48 KiB of shared memory.
AttentionKernel emit_attention(const TensorType& q, const TensorType& k, const TensorType& v, bool has_mask,
                               const TensorType& mask, const AttrMap& attrs, const AttentionEpilogue& epi);

// The plain op: buffers out, q, k, v[, mask]. `sym_min` / `sym_max`: the
// symbols' ranges where the operands have symbolic dims.
AttentionKernel emit_attention_op(const AttrMap& attrs, const std::vector<TensorType>& operands, const TensorType& out,
                                  const SymbolBindings& sym_min = {}, const SymbolBindings& sym_max = {});

// Whether a shape-generic kernel handles the bare attention op (heads and
// head dims static); a fused attention is shape-generic when this holds for
// its op and its epilogue takes symbolic sizes (codegen/emitter_generic.h,
// generic_attention).
bool attention_shape_generic(const Node& n);
// The same for an attention op in the body of fused node `ranges_from`, whose
// graph declares the symbols' ranges (a body graph declares none).
bool attention_shape_generic(const Node& n, const Node& ranges_from);

// Whether `n` is a fused node of kind "attention" whose body is one attention
// op and an epilogue codegen/emitters/gemm_conv/emit_epilogue.h accepts (reshape, identity,
// transpose, split, slice, one-index gather, pointwise ops with outside
// operands broadcast into the element), the attention's operands being
// body inputs or constants.
bool is_attention_fused(const Node& n);

struct FusedAttentionKernel {
  AttentionKernel kernel;  // buffers: the node's results, its operands, then `constants`
  std::vector<Tensor> constants;
};

// Throws kiln::Unsupported (naming the body op) when !is_attention_fused(n).
FusedAttentionKernel emit_fused_attention(const Node& n);

}  // namespace kiln::codegen
