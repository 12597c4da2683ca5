// The kernel of linear_attention (ops/linear_attention_op.cpp): ONNX
// LinearAttention's recurrence. Every column m of a (batch, kv head)'s state
// S [dk, dv] evolves on its own (the decay scales rows, the delta rule's
// retrieval S^T k and the outer-product write k v^T touch column m with v's
// element m only, and each query head reads q^T S column by column), so one
// thread owns one column for the whole sequence: its dk state values live in
// shared memory (column-interleaved, so a warp's accesses hit 32 banks), it
// walks t = 0..T-1 doing the reference's arithmetic in the reference's
// order (float, sums over d in order), writes its element of every query
// head of the group per step, and finally its column of present_state. No
// barrier: threads never read each other's state. Blocks of up to 128
// threads, fewer when dk is large (48 KiB of static shared memory); dk above
// 12288 is kiln::Unsupported.
//
// A sequential scan over T is what ONNX's function body does too; a
// chunk-parallel prefill (ONNX's chunk_size hint) would need tensor-core
// GEMMs per chunk and is not done (docs/codegen.md).
#pragma once
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

struct LinearAttentionKernel {
  std::string name;
  std::string source;
  unsigned grid = 0;  // 0: nothing to launch
  unsigned block = 0;
};

// `operands`: the node's operand types (q, k, v, past_state?, decay?, beta?),
// `present[i]` whether operand i is there (absent ones are null buffers);
// `results`: output and present_state. Buffers: the results, then the
// operand slots in order.
LinearAttentionKernel emit_linear_attention(const AttrMap& attrs, const std::vector<TensorType>& operands,
                                            const std::vector<bool>& present, const std::vector<TensorType>& results);

}  // namespace kiln::codegen
