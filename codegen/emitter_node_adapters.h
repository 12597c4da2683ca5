// The adapters from a graph node to the emitters of the irregular op
// families (attention, recurrent, misc, data-dependent sizes, tf-idf, index
// select, scatter, resize, sample, conv gather): for each, whether it handles
// the node and the node's kernels. codegen/emitter_table.cpp lists them in
// its dispatch table beside the generic families' adapters.
#pragma once
#include <vector>

#include "codegen/emitter_table.h"

namespace kiln::codegen::node_adapters {

// The launch every emitter's kernel struct describes (name, source, grid,
// block), as a NodeKernel. Dynamic shared memory, a result subset and extra
// buffers are set by the caller where the kernel has them (some structs'
// `shared_bytes` count static shared memory, which is not launch state).
template <class K>
NodeKernel node_kernel(const K& k, std::vector<Tensor> extra = {}) {
  NodeKernel nk;
  nk.name = k.name;
  nk.source = k.source;
  nk.grid = k.grid;
  nk.block = k.block;
  nk.extra = std::move(extra);
  if constexpr (requires { k.symbols; }) {
    if (!k.symbols.empty()) {
      nk.symbols = k.symbols;
      nk.grid_expr[0] = k.grid_expr;
      nk.grid_expr[1] = {1, 1, 0};
      nk.grid_expr[2] = {1, 1, 0};
      if constexpr (requires { k.grid_expr_y; }) {
        nk.grid_expr[1] = k.grid_expr_y;
        nk.grid_expr[2] = k.grid_expr_z;
      }
    }
  }
  return nk;
}

// Every operand present: the executor passes each input as a buffer.
inline bool operands_present(const Node& n) {
  for (Value* v : n.inputs())
    if (!v) return false;
  return true;
}

bool handles_attention(const Node& n);
std::vector<NodeKernel> emit_attention_node(const Node& n);
bool handles_rnn(const Node& n);
std::vector<NodeKernel> emit_rnn_node(const Node& n);
bool handles_linear_attention(const Node& n);
std::vector<NodeKernel> emit_linear_attention_node(const Node& n);
bool handles_misc(const Node& n);
std::vector<NodeKernel> emit_misc_node(const Node& n);
bool handles_data_dependent(const Node& n);
std::vector<NodeKernel> emit_data_dependent_node(const Node& n);
bool handles_tfidf(const Node& n);
std::vector<NodeKernel> emit_tfidf_node(const Node& n);
bool handles_index_select(const Node& n);
std::vector<NodeKernel> emit_index_select_node(const Node& n);
bool handles_scatter(const Node& n);
std::vector<NodeKernel> emit_scatter_node(const Node& n);
bool handles_resize(const Node& n);
std::vector<NodeKernel> emit_resize_node(const Node& n);
bool handles_sample(const Node& n);
std::vector<NodeKernel> emit_sample_node(const Node& n);
bool handles_conv_gather(const Node& n);
std::vector<NodeKernel> emit_conv_gather_node(const Node& n);

}  // namespace kiln::codegen::node_adapters
