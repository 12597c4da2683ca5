// Symbolic dims (docs/dynamic_shapes.md): a dim of a Shape is either a
// constant >= 0 or a symbolic dim, an integer polynomial over named symbols
// ("batch", "batch*seq", "seq+1", "12*seq"). A symbolic dim is stored in the
// same int64_t as a handle into a process-wide table of interned polynomials,
// far below any dim or sentinel (-1) a model could hold, the way PyTorch's
// SymInt packs a node into an int64. So Shape, TensorType, attributes and
// i64 shape tensors carry symbols unchanged, static graphs are untouched, and
// code that is not symbol-aware fails loudly: shape_numel and the tensor
// allocator reject a handle like any negative dim, and infer_types refuses
// symbolic operands for ops whose inference is not marked symbol-aware.
//
// Handles are canonical within a process (the same polynomial always gets the
// same handle, so == on dims and TensorTypes means equal polynomials) but not
// across processes: never write one to a file; print it (dim_str).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/tensor.h"

namespace kiln {

// A monomial: the symbol names of a product, sorted, repeats allowed
// ({} is the constant term).
using DimMonomial = std::vector<std::string>;
// sum of coefficient * monomial; no zero coefficients.
using DimPoly = std::map<DimMonomial, int64_t>;

// A value for each symbol; what specialisation substitutes.
using SymbolBindings = std::map<std::string, int64_t, std::less<>>;

// Whether `d` is the handle of a symbolic dim.
bool is_symbolic_dim(int64_t d);
bool has_symbolic_dims(const Shape& s);
// The handle of the dim that is the symbol `name` alone. Throws kiln::Error
// when `name` is not a valid symbol name (is_symbol_name).
int64_t symbol_dim(std::string_view name);
// Symbol names are identifiers (ir/text_format.h) other than the words the
// text form gives another meaning in a dim or list: in, inf, nan, true, false.
bool is_symbol_name(std::string_view name);

// The polynomial of a dim (a constant for a plain dim).
DimPoly dim_poly(int64_t d);
// The dim of a polynomial: its constant when it has no symbol, else its
// handle. Throws kiln::Error for a negative constant.
int64_t dim_of_poly(const DimPoly& p);

// Arithmetic on dims, exact and overflow-checked (kiln::Error). dim_sub and
// dim_of_poly reject a negative constant result.
int64_t dim_add(int64_t a, int64_t b);
int64_t dim_sub(int64_t a, int64_t b);
int64_t dim_mul(int64_t a, int64_t b);
// a / b when b divides a as polynomials (b a constant or a monomial with a
// coefficient); nullopt otherwise (and for b == 0).
std::optional<int64_t> dim_div_exact(int64_t a, int64_t b);
// The product of the dims, symbolic where they are.
int64_t dim_product(const Shape& s);

// Integer arithmetic on shape values (the i64 tensors Shape gives, which
// exported models gather, add and multiply before a Reshape): as the dim_*
// functions, but constants and results may be negative. value_div is ONNX's
// integer Div (truncating) where it is exact for every value of the symbols;
// nullopt otherwise (the result is then not known at compile time).
int64_t value_add(int64_t a, int64_t b);
int64_t value_sub(int64_t a, int64_t b);
int64_t value_mul(int64_t a, int64_t b);
std::optional<int64_t> value_div(int64_t a, int64_t b);

// "batch", "batch*seq", "2*seq+1", "seq-1"; a constant prints as its number.
std::string dim_str(int64_t d);
// "[batch,3,224,224]"-style dims joined with `sep`.
std::string dims_str(const Shape& s, std::string_view sep = ",");

// The symbol names a dim / shape uses, sorted, each once.
std::vector<std::string> dim_symbols(int64_t d);
std::vector<std::string> shape_symbols(const Shape& s);

// `d` with the symbols `b` binds replaced by their values; the others (e.g.
// data-dependent ones, which only a run binds) stay, so the result may still
// be symbolic. Throws kiln::Error on overflow, or when every symbol is bound
// and the value is negative.
int64_t substitute_dim(int64_t d, const SymbolBindings& b);
// The value of a dim under `b`: substitute_dim, and an error naming a symbol
// `b` leaves unbound.
int64_t eval_dim(int64_t d, const SymbolBindings& b);
Shape eval_shape(const Shape& s, const SymbolBindings& b);

// The first symbolic dim of the shape, its index, or -1.
int first_symbolic_dim(const Shape& s);

}  // namespace kiln
