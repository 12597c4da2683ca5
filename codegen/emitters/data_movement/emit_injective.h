// The injective emitter: CUDA kernels for data-movement ops written as index
// maps (design.md section 4): each output element i, with coordinates
// o0..o{r-1} over the result's shape, reads one element of one operand (or a
// constant fill value). One generic kernel shell (grid-stride loop over the
// result, coordinates, a select over the operands, one store); each op
// contributes only the code that turns the coordinates into
//   `src` (which operand, -1 for the fill value) and `off` (its element offset).
// Elements are copied as unsigned integers of their size (1/2/4/8 bytes), so
// every dtype (f16/bf16/bool included) is copied bit for bit.
//
// Covered: transpose, reshape, expand, slice (canonical starts/ends/steps),
// concat, split (one kernel per result), pad (constant/reflect/edge/wrap,
// negative pads, value attribute or operand), tile, gather (any axis, i32/i64
// indices, negative indices wrap), gather_elements, trilu, depth_to_space
// (DCR/CRD), space_to_depth.
//
// Gather with an index outside [-n, n): the reference raises an error; the
// kernel writes zero bytes for that element (no error flag yet) -- callers
// must validate indices, or rely on the simulator's checked pointers in tests.
//
// Kernel: `extern "C" __global__ void NAME(KILN_PTR(E) out, KILN_PTR(const T0)
// in0, ...)`, same prelude / KILN_SIM entry conventions as emit_pointwise.h
// (buffers/counts: out first, then the operands).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codegen/core/size_expr.h"
#include "codegen/launch_fit.h"
#include "ir/attribute.h"
#include "ir/op_registry.h"
#include "ir/tensor.h"

namespace kiln::codegen {

struct InjectiveKernel {
  std::string name;                     // kiln_inj_<op>_<16 hex digits of the source's hash>
  std::string source;                   // complete translation unit
  int64_t numel = 0;                    // result elements
  unsigned block = block_threads(256);  // the one decision (codegen/launch_fit.h)
  unsigned grid = 0;                    // 0 for an empty result: nothing to launch
  std::vector<int64_t> counts;          // elements of each buffer: out, then each operand (empty: shape-generic)
  // Shape-generic (symbolic sizes, docs/dynamic_shapes.md): the kernel's
  // kiln_syms and its grid per shape (NodeKernel::symbols).
  std::vector<std::string> symbols;
  GridAxisExpr grid_expr;
};

// True when emit_injective_op handles op `name`.
bool injective_supported(const std::string& name);
// True when its kernel for op `name` may take symbolic sizes (a plan with
// shape profiles): reshape, transpose, expand, slice, concat, split, gather,
// gather_elements, gather_nd.
bool injective_shape_generic(const std::string& name);

// The index map of result `result` of an injective op, for any kernel shell:
// the standalone kernel below, or an expression inside another kernel
// (codegen/core/emit_body_eval.h evaluates fused bodies with it).
struct InjectiveMap {
  // Statements (indented 4) that, given the result's flat index `i` and its
  // coordinates o0..o{r-1} (coordinates_code()), set the caller's `int src`
  // (which operand to read; -1: the fill value) and `kidx off` (the element
  // offset in it). They spell the index type `kidx` and the 64-bit literal
  // suffix `@L@`; finish_index_types() replaces both.
  std::string code;
  std::vector<bool> data;  // per operand: whether `src` may name it
  int fill_operand = -1;   // the operand whose element 0 is the fill (pad's value operand), or
  uint64_t fill_bits = 0;  // the fill's bit pattern in the result's dtype
};

// The symbols injective_index_map() and coordinates_code() spell symbolic
// dims with (`ks.v[...]`), on this thread, while the scope lives: a kernel
// with symbolic sizes that evaluates index maps in its own shell (a fused
// body, codegen/core/emit_body_eval.h) opens one around its emission.
class InjectiveSymbolsScope {
 public:
  explicit InjectiveSymbolsScope(const KernelSymbols* syms);
  ~InjectiveSymbolsScope();
  InjectiveSymbolsScope(const InjectiveSymbolsScope&) = delete;
  InjectiveSymbolsScope& operator=(const InjectiveSymbolsScope&) = delete;

 private:
  const KernelSymbols* previous_;
};

// `read(k, off)` must give an expression reading element `off` of operand k;
// the map uses it for operands that are not data (gather's indices).
InjectiveMap injective_index_map(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                 const std::vector<TensorType>& outs, int result,
                                 const std::function<std::string(int, const std::string&)>& read);

// Statements (each prefixed with `indent`) declaring `const kidx o0..o{r-1}`,
// the coordinates of flat index `flat` over shape `s`.
std::string coordinates_code(const Shape& s, const std::string& flat, const std::string& indent);

// `code` with `kidx` as int and `@L@` empty when `narrow` (every index below
// 2^31), else long long and LL.
std::string finish_index_types(const std::string& code, bool narrow);

// Emits the kernel writing result `result` of `def` (attributes `attrs`,
// operands `operands`, results `outs` as inferred). Throws kiln::Error for an
// op it does not handle or operands that do not fit the op.
InjectiveKernel emit_injective_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                  const std::vector<TensorType>& outs, int result = 0);

}  // namespace kiln::codegen
