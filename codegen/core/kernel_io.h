// How a generated kernel reads its operands and writes its results, for
// emitters whose kernels are reused inside fused nodes.
//
// KernelBuffer / kernel_params / kernel_sim_entry: a kernel's parameter list
// (`KILN_PTR(T) name`, results first) and its simulator entry NAME_sim, so an
// emitter need not spell out either.
//
// AnchorIO is the hook of reduction-category emitters (reduce_*, softmax,
// the normalizations; docs/codegen.md "The anchor hook"): an emitter writes
// its kernel against an AnchorIO instead of against `in0[...]` / `out[...]`,
// so the same emitter serves the op alone (plain_io) and as the anchor of a
// fused `reduction` node (codegen/emitters/reduction/emit_fused_reduction.h: operand 0 computed
// by the body's prologue as it is read, epilogue applied at the store, extra
// results written on the way).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace kiln::codegen {

struct KernelBuffer {
  std::string name;  // parameter name: out, out0.., in0..
  DType dtype;       // stored as cuda_storage_type(dtype)
  bool written;      // a result (non-const pointer)
  int64_t count;     // elements
};

// Elements of a buffer (KernelBuffer::count); a symbolic count stays a dim (a
// shape-generic kernel's plan records the count at the largest shapes instead).
int64_t kernel_buffer_count(const TensorType& t);

// "KILN_PTR(float) out, KILN_PTR(const __half) in0, ...".
std::string kernel_params(const std::vector<KernelBuffer>& buffers);

// The `#ifdef KILN_SIM` entry `@NAME@_sim(cfg, buffers, counts, error)`
// launching `@NAME@` with every buffer in order as a checked pointer;
// `by_value_syms`: then the kiln_syms of a shape-generic kernel, read from one
// more buffer (codegen/core/size_expr.h).
std::string kernel_sim_entry(const std::vector<KernelBuffer>& buffers, bool by_value_syms = false);

// "#include <cuda_fp16.h>" / "<cuda_bf16.h>" (outside KILN_SIM) when any of
// `dtypes` needs it, then the shared kernel prelude.
std::string kernel_headers(const std::vector<DType>& dtypes);

// `body` with @NAME@ replaced by `<prefix>_<label>_<xxh64 of body>`; sets name.
std::string name_kernel(const std::string& prefix, const std::string& label, const std::string& body,
                        std::string& name);

// The anchor hook. All indices are flat (row-major) element indices, given
// as C expressions of an integer type.
struct AnchorIO {
  std::vector<KernelBuffer> buffers;  // the kernel's parameters, in order
  std::vector<DType> dtypes;          // every dtype the helpers compute in (for kernel_headers)
  // Statements placed at the top of the kernel body, before any loop (the
  // fused IO defines its evaluator lambdas there). Indented 2.
  std::string setup;
  // An expression of operand k's storage type: its element `idx`.
  // `record` (operand 0 only): this read is the one pass in which the
  // kernel reads each element of operand 0 exactly once over the whole grid;
  // the fused IO also writes the prologue's extra results there. An emitter
  // passes record = true on exactly one such pass (the first) and never when
  // its reads overlap (windows): then it must not be given a fused IO with
  // prologue results (has_records).
  std::function<std::string(int k, const std::string& idx, bool record)> load;
  // Statements (indented by `indent`) storing `value`, an expression of
  // result r's storage type, as element `idx` of result r. Every element of
  // every result the emitter writes must be stored exactly once.
  std::function<std::string(int r, const std::string& idx, const std::string& value, const std::string& indent)> store;
  bool has_records = false;  // whether load(0, .., true) writes extra results
};

// Buffers `out` (or out0, out1.. for several results), then in0, in1..;
// loads `in<k>[idx]`, stores `out<r>[idx] = value;`.
AnchorIO plain_io(const std::vector<TensorType>& operands, const std::vector<TensorType>& results);

}  // namespace kiln::codegen
