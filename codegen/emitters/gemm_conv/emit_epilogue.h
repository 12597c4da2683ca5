// The epilogue of an anchored kernel (conv, gemm/matmul, attention): what a
// fused node of kind conv_epilogue / gemm_epilogue / attention does to each
// element of its anchor's result before storing it (docs/fusion.md).
//
// The anchor kernel computes one accumulator value per element of the
// anchor's result; Epilogue::code() turns (that value, the element's row-major
// index in the anchor's result) into statements that compute every epilogue
// value holding that element and store it into each result it reaches:
//   - pointwise ops (emit_expr), each value rounded to its dtype as the
//     reference stores it; operands from outside the group (bias, residual,
//     small body constants) broadcast into the op's shape;
//   - reshape / identity keep the element's index;
//   - transpose permutes its coordinates; split, slice and a gather of one
//     constant index keep it only where it lands in their result (elements
//     outside are not stored there), and re-map it.
// A bare anchor node (no fused body) is the trivial epilogue: one result, the
// anchor's, stored at the index.
//
// Buffers of the kernel (the order of codegen/emitter_table.h's NodeKernel):
// `out0`, `out1`... for the node's results, then `in0`, `in1`... for operand
// slots: the node's inputs in order, then the body's constants (constants(),
// passed as NodeKernel::extra). The anchor's own operands are slots too
// (anchor_slot()).
#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/core/size_expr.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "ir/tensor.h"

namespace kiln::codegen {

struct EpiloguePlace;  // codegen/emitters/gemm_conv/epilogue_place.h

class Epilogue {
 public:
  // A fused node whose body is one anchor (an op named in `anchors`) and
  // epilogue ops after it. Throws kiln::Unsupported for a body outside the
  // rules above, naming the node and the op.
  static Epilogue from_fused(const Node& fused, const OpRegistry& ops, const std::vector<std::string>& anchors);
  // A bare node: its only result is the anchor's.
  static Epilogue from_node(const Node& anchor);

  // The anchor (a body node for a fused node).
  const Node& anchor() const { return *anchor_; }
  // The node the kernel computes: the fused node, or the bare anchor (its
  // graph declares the symbols' ranges).
  const Node& node() const { return *node_; }
  // The slot anchor operand i reads, or -1 when the operand is absent.
  int anchor_slot(int i) const;
  const std::vector<TensorType>& results() const { return results_; }
  const std::vector<TensorType>& slots() const { return slots_; }
  // Tensors for the slots after the node's inputs.
  const std::vector<Tensor>& constants() const { return constants_; }
  // The symbols of every shape it reads or writes (slots, results, the
  // body's values): non-empty for a shape-generic kernel (a plan with shape
  // profiles), whose sizes code() then reads from `ks`. Such an epilogue
  // takes pointwise ops and reshapes only.
  const KernelSymbols& symbols() const { return syms_; }
  // Reads its sizes from the slots of `kernel`'s symbols, a superset of
  // symbols() (an attention reading a KV cache through its capacity has one
  // more kiln_syms slot per cache than its epilogue reads); throws
  // kiln::Unsupported naming a symbol of the epilogue `kernel` lacks.
  void read_symbols_of(const KernelSymbols& kernel);

  // Statements (each line prefixed by `indent`, wrapped in one `{ }` block)
  // that take `acc`, an expression of the anchor's compute type (float for
  // f16/bf16/f32, double for f64, long long for integers), holding the
  // anchor's result element at row-major index `index` (an expression of
  // index_type()), and store every result element it gives.
  std::string code(const std::string& acc, const std::string& index, const std::string& indent) const;
  // The vectorized form of code() (emit_epilogue_vector.cpp): `accs` names an
  // array of `width` accumulators (anchor compute type) holding the anchor's
  // result elements index0 .. index0 + width - 1, index0 a multiple of
  // `width` (the caller guarantees it, and that the anchor's last dim is a
  // multiple of `width`: the elements lie in one row). Operands of the same
  // shape as an op, or broadcast along all but its last dim (a bias), are
  // read `width` elements per load, results stored `width` per store, each
  // buffer where its address allows (checked at run time, else that tensor
  // goes element by element); operands constant along the row are read once.
  std::string vector_code(const std::string& accs, const std::string& index0, int width,
                          const std::string& indent) const;
  // The elements per access of vector_code(): 16 bytes of the widest buffer it
  // moves per element (f16/bf16 results: 8, f32: 4), or 0 when it does not
  // apply: a low-bit or 8-byte type, an anchor row that is not a multiple of
  // the width, a pointwise op reading a value whose elements a layout op moved
  // apart (vector_contiguity). Layout ops (transpose, split, slice, gather)
  // are mapped per vector; a result whose elements they keep next to each
  // other is stored as one vector, any other element by element.
  int vector_width() const;
  // Memory accesses per `vector_width()` elements in vector_code() (each
  // result's store, each operand load that varies along the row), and the
  // bytes they move per element: the performance model's epilogue term
  // (perf/perf_model.h) reads them from the kernel's header.
  int vector_accesses() const;
  int bytes_per_element() const;
  // The same for code(), one element per access.
  int scalar_accesses() const;

  // "int" while every result and slot has fewer than 2^31 elements, else "long long".
  const char* index_type() const { return wide_ ? "long long" : "int"; }
  bool wide() const { return wide_; }

  // Kernel parameters `KILN_PTR(T) out0, ..., KILN_PTR(const T) in0, ...`.
  std::string params() const;
  // The simulator entry `extern "C" int <name>_sim(...)` (under #ifdef KILN_SIM) launching <name> with the
  // buffers above, then (`workspace`) an f32 scratch buffer `ws` (NodeKernel::workspace_f32), then
  // (`tickets`) the u32 counters `tickets` (NodeKernel::tile_counters), then (`syms`) a shape-generic
  // kernel's by-value kiln_syms.
  std::string sim_entry(const std::string& name, bool workspace = false, bool tickets = false, bool syms = false) const;
  // `#include <cuda_fp16.h>` / `<cuda_bf16.h>` (outside KILN_SIM) as the results, slots or body use them.
  std::string fp_includes() const;

 private:
  // The body's nodes after the anchor, in order (none for a bare node): the
  // epilogue ops every part of the emitter walks.
  std::vector<const Node*> epilogue_nodes() const;
  // Which values keep a vector's elements consecutive (emit_epilogue_vector.cpp); false: no vector form.
  bool vector_contiguity(int width, std::unordered_map<const kiln::Value*, bool>& contig) const;
  // The places of layout op `node`'s results from its input's place (emit_epilogue.cpp).
  void place_layout(const Node& node, const EpiloguePlace& src, const std::string& pre, const std::string& ind,
                    std::string& b, std::unordered_map<const kiln::Value*, EpiloguePlace>& place) const;
  const Node* anchor_ = nullptr;
  const Node* node_ = nullptr;
  const Graph* body_ = nullptr;  // null for a bare node
  const OpRegistry* ops_ = nullptr;
  std::vector<int> anchor_slots_;
  std::vector<TensorType> results_, slots_;
  std::vector<Tensor> constants_;
  std::vector<const kiln::Value*> slot_values_;  // body value read through each slot (null: none)
  std::map<const Node*, Tensor> gather_index_;   // a gather's one constant index
  bool wide_ = false;
  KernelSymbols syms_;
};

// For a slice or a one-index gather in a shape-generic epilogue: "" when
// every dim it cuts or picks from is static (a symbolic dim passes whole:
// start 0, step 1, its full extent), else what it does along a symbolic dim
// ("slices dim 2 (seq) ..."). The predicate the emitter table asks
// (codegen/emitter_generic.cpp) and the emitter's refusal share it.
std::string symbolic_cut_refusal(const Node& layout_op);

// Statements declaring `dst` (an array of `width` elements of `t`'s storage
// type; `width` is text: a number, or @V@ for a caller to substitute) and
// filling it from buffer `buf` at element offset `off` (a multiple of
// `width`): one kiln_vec load where the buffer's address is a multiple of the
// vector's size (checked at run time), else element by element.
std::string vector_load_statements(const std::string& dst, DType t, const std::string& buf, const std::string& off,
                                   const std::string& width, const std::string& indent);

}  // namespace kiln::codegen
