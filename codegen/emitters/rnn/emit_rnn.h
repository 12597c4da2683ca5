// The recurrent emitter: rnn, gru and lstm (ops/rnn_ops.cpp: every direction,
// both layouts, clip, the listed activations with their alpha/beta, initial
// states, sequence_lens, lstm peepholes and input_forget, gru
// linear_before_reset) as one kernel per node.
//
// Launch plan (docs/codegen.md, "Recurrent ops"): the time loop is inherently
// sequential, but batch entries and directions are independent. So one block
// per (direction, batch entry) runs that sequence's whole time loop (a
// persistent block: no launch per step), its threads parallel over the
// hidden units (thread x owns units x, x + blockDim.x, ...). The hidden state
// lives in shared memory, double-buffered, with one __syncthreads per step
// (gru without linear_before_reset: two, since r * h must be complete before
// the candidate's product with R_h). Each unit's gate pre-activations are
// dot products of x_t with its W rows plus h with its R rows, computed as the
// reference sums them: (x W^T + (Wb + Rb)) + h R^T (gru's hidden gate adds
// Rb_h with the recurrence). Compute type: float for f16/bf16/f32 (as the
// reference), double for f64. Entries' steps past their sequence length
// write zeros to Y; a reverse direction walks each entry's valid steps
// backwards. sequence_lens values are clamped to [0, seq_length] (the
// reference rejects them; a kernel cannot).
#pragma once
#include <string>
#include <vector>

#include "codegen/core/kernel_params.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

struct RnnKernel {
  std::string name;                 // kiln_rnn_<op>_<16 hex digits of the source's hash>
  std::string source;               // complete translation unit
  unsigned grid = 0;                // directions * batch (0: nothing to launch)
  unsigned block = 0;               // hidden size rounded up to a warp, at most 256
  std::vector<KernelParam> params;  // the results, then every operand slot (absent ones: null buffers)
};

// `op` is "rnn", "gru" or "lstm"; `operands` has one entry per operand slot
// (absent: present[i] false); `results` are the node's results (Y, then
// optionally Y_h, Y_c). Throws kiln::Error for inconsistent types,
// kiln::Unsupported for an unknown activation or a hidden state too large
// for shared memory.
RnnKernel emit_rnn_op(const std::string& op, const AttrMap& attrs, const std::vector<TensorType>& operands,
                      const std::vector<bool>& present, const std::vector<TensorType>& results);

}  // namespace kiln::codegen
