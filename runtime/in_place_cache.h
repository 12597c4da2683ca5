// A KV cache bound in place (docs/dynamic_shapes.md, "KV cache in place"):
// one caller buffer of the full capacity serves as a plan's past input and
// its present output, as ORT GenAI's past_present_share_buffer does. The
// plan says which pairs may share (concats marked in_place_append by
// passes/kv_cache_in_place.cpp); a run reads the past from the buffer's first
// `past` positions along the axis and writes only the new positions after
// them, each row of the outer dims `capacity` positions apart.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::rt {

// Input `input` and output `output` of a plan may share one buffer; the
// present is the past with positions appended along `axis`.
struct InPlacePair {
  size_t input = 0, output = 0;
  int axis = 0;
  const Node* concat = nullptr;  // the marked concat of the plan's graph
  // Whether a node other than the concat reads the past (then the run
  // needs the past as a tensor of its own; else only the concat reads it,
  // and the runtime runs the concat on the buffer itself).
  bool past_read_elsewhere = false;
  // The capacity symbol every reader of the present takes (attentions with
  // k_capacity / v_capacity naming it, passes/kv_cache_in_place.cpp): they
  // read its rows through the buffer's capacity, so the present is the
  // buffer itself, with no gather, whatever the rows. Empty when a reader
  // needs a dense tensor.
  std::string capacity_symbol;
};

// The pairs of a plan's graph: top-level concats marked in_place_append
// whose operand 0 is a graph input and whose result is a graph output.
std::vector<InPlacePair> find_in_place_pairs(const Graph& g);

// The pair of `input` and `output`; kiln::Error naming both (and the pairs
// the plan has) when the plan does not append to `input` into `output`.
const InPlacePair& in_place_pair(const std::vector<InPlacePair>& pairs, const Graph& g, const std::string& input,
                                 const std::string& output);

// Checks a run of a pair against the buffer's capacity shape: the same rank,
// the dims off the axis equal to the present's (`present`, the output's shape
// for the shapes set), and room for the present along the axis. kiln::Error
// naming the input, the output, the dim and both sizes.
void check_in_place_capacity(const InPlacePair& p, const Graph& g, const Shape& capacity, const Shape& present);

// The past, read from the buffer (its first past[axis] positions along the
// axis) into a tensor of shape `past`.
Tensor read_past(const void* buffer, const Shape& capacity, int axis, DType dtype, const Shape& past);

// Writes the present's positions from `past_len` on into the buffer (the
// past's positions are already there); returns the bytes written.
size_t write_appended(void* buffer, const Shape& capacity, int axis, const Tensor& present, int64_t past_len);

// Writes all positions of `part` into the buffer at positions at.. along the
// axis (the new positions a concat appends); returns the bytes written.
size_t write_positions(void* buffer, const Shape& capacity, int axis, const Tensor& part, int64_t at);

// The buffer's first present[axis] positions as a tensor of shape `present`:
// the buffer itself (no copy) when its readers step over rows by the
// capacity (`strided_readers`: InPlacePair::capacity_symbol, bound to
// capacity[axis] for the run), or when those positions are contiguous (one
// row of outer dims, or a full buffer) and the dtype is 32 bits or wider (a
// view has no tail slack for vector reads of narrower types); else a copy.
// `copied` gets the bytes copied (0 for the view).
Tensor present_in_buffer(void* buffer, const Shape& capacity, int axis, DType dtype, const Shape& present,
                         bool strided_readers, size_t* copied);

}  // namespace kiln::rt
