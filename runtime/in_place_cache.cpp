#include "runtime/in_place_cache.h"

#include <fmt/format.h>

#include <cstring>

#include "ir/error.h"
#include "ir/symbolic_dim.h"

namespace kiln::rt {

namespace {

size_t index_of(const std::vector<Value*>& vs, const Value* v) {
  for (size_t i = 0; i < vs.size(); ++i)
    if (vs[i] == v) return i;
  return vs.size();
}

// Rows of the dims before the axis, and bytes of one position (the dims after it).
void split(const Shape& s, int axis, DType dtype, int64_t* outer, size_t* position_bytes) {
  *outer = 1;
  for (int i = 0; i < axis; ++i) *outer *= s[i];
  int64_t inner = 1;
  for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
  *position_bytes = static_cast<size_t>(inner) * dtype_size(dtype);
}

// The symbol every reader of `v` steps over its rows by: each use an
// attention's keys (k_capacity) or values (v_capacity) naming one symbol,
// directly or inside a fused attention's body (its epilogue after it). Empty
// when any reader reads it densely.
std::string capacity_readers_symbol(const Value& v) {
  std::string sym;
  for (const Use& u : v.uses()) {
    std::string s;
    if (u.user->op() == "fused" && u.user->body() && u.operand < static_cast<int>(u.user->body()->inputs().size())) {
      s = capacity_readers_symbol(*u.user->body()->inputs()[u.operand]);
    } else if (u.user->op() == "attention" && (u.operand == 1 || u.operand == 2)) {
      s = u.user->attrs().get_string(u.operand == 1 ? "k_capacity" : "v_capacity", "");
    }
    if (s.empty() || (!sym.empty() && s != sym)) return "";
    sym = s;
  }
  return sym;
}

}  // namespace

std::vector<InPlacePair> find_in_place_pairs(const Graph& g) {
  std::vector<InPlacePair> pairs;
  for (const auto& n : g.nodes()) {
    if (n->op() != "concat" || n->attrs().get_int("in_place_append", 0) != 1 || n->num_inputs() != 2) continue;
    size_t in = index_of(g.inputs(), n->input(0)), out = index_of(g.outputs(), n->output(0));
    if (in == g.inputs().size() || out == g.outputs().size()) continue;
    int rank = n->input(0)->type().rank();
    int64_t axis = n->attrs().get_int("axis", 0);
    const bool elsewhere = n->input(0)->uses().size() != 1 || n->input(1) == n->input(0);
    pairs.push_back({in, out, static_cast<int>(axis < 0 ? axis + rank : axis), n.get(), elsewhere,
                     capacity_readers_symbol(*n->output(0))});
  }
  return pairs;
}

const InPlacePair& in_place_pair(const std::vector<InPlacePair>& pairs, const Graph& g, const std::string& input,
                                 const std::string& output) {
  std::vector<std::string> names;
  for (const InPlacePair& p : pairs) {
    if (g.inputs()[p.input]->name() == input && g.outputs()[p.output]->name() == output) return p;
    names.push_back(fmt::format("\"{}\" -> \"{}\"", g.inputs()[p.input]->name(), g.outputs()[p.output]->name()));
  }
  if (names.empty())
    fail(
        "input \"{}\" and output \"{}\" cannot share one buffer: the plan appends to no input in place (a cache's "
        "past input of symbolic length concatenated into an output; compile the model with a shape profile)",
        input, output);
  fail("input \"{}\" and output \"{}\" cannot share one buffer: the plan appends in place only for {}", input, output,
       fmt::join(names, ", "));
}

void check_in_place_capacity(const InPlacePair& p, const Graph& g, const Shape& capacity, const Shape& present) {
  const std::string& in = g.inputs()[p.input]->name();
  const std::string& out = g.outputs()[p.output]->name();
  if (capacity.size() != present.size())
    fail("input \"{}\" and output \"{}\": the buffer bound in place is [{}], rank {}; the output's rank is {} ([{}])",
         in, out, fmt::join(capacity, ","), capacity.size(), present.size(), fmt::join(present, ","));
  for (size_t k = 0; k < present.size(); ++k) {
    if (static_cast<int>(k) == p.axis) {
      if (capacity[k] < present[k])
        fail(
            "output \"{}\" needs {} positions along dim {} ([{}]), but the buffer bound in place with input \"{}\" "
            "holds {} ([{}])",
            out, present[k], k, fmt::join(present, ","), in, capacity[k], fmt::join(capacity, ","));
    } else if (capacity[k] != present[k]) {
      fail(
          "input \"{}\" and output \"{}\": the buffer bound in place is [{}], whose dim {} ({}) differs from the "
          "output's [{}]: only dim {} (the positions appended along) may differ",
          in, out, fmt::join(capacity, ","), k, capacity[k], fmt::join(present, ","), p.axis);
    }
  }
}

Tensor read_past(const void* buffer, const Shape& capacity, int axis, DType dtype, const Shape& past) {
  Tensor t(TensorType(dtype, past));
  int64_t outer = 0;
  size_t position = 0;
  split(capacity, axis, dtype, &outer, &position);
  const size_t row = position * static_cast<size_t>(past[axis]);
  const size_t stride = position * static_cast<size_t>(capacity[axis]);
  const auto* src = static_cast<const uint8_t*>(buffer);
  auto* dst = static_cast<uint8_t*>(t.raw());
  if (row)
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * row, src + o * stride, row);
  return t;
}

size_t write_positions(void* buffer, const Shape& capacity, int axis, const Tensor& part, int64_t at) {
  int64_t outer = 0;
  size_t position = 0;
  split(capacity, axis, part.dtype(), &outer, &position);
  const size_t bytes = position * static_cast<size_t>(part.shape()[axis]);
  const size_t stride = position * static_cast<size_t>(capacity[axis]);
  const size_t from = position * static_cast<size_t>(at);
  auto* dst = static_cast<uint8_t*>(buffer);
  const auto* src = static_cast<const uint8_t*>(part.raw());
  if (bytes)
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * stride + from, src + o * bytes, bytes);
  return bytes * static_cast<size_t>(outer);
}

Tensor present_in_buffer(void* buffer, const Shape& capacity, int axis, DType dtype, const Shape& present,
                         bool strided_readers, size_t* copied) {
  int64_t outer = 0;
  size_t position = 0;
  split(capacity, axis, dtype, &outer, &position);
  if (strided_readers || ((outer <= 1 || present[axis] == capacity[axis]) && dtype_size(dtype) >= 4)) {
    *copied = 0;
    return Tensor::view(TensorType(dtype, present), buffer);
  }
  Tensor t = read_past(buffer, capacity, axis, dtype, present);
  *copied = t.nbytes();
  return t;
}

size_t write_appended(void* buffer, const Shape& capacity, int axis, const Tensor& present, int64_t past_len) {
  int64_t outer = 0;
  size_t position = 0;
  split(capacity, axis, present.dtype(), &outer, &position);
  const int64_t total = present.shape()[axis];
  const size_t from = position * static_cast<size_t>(past_len);
  const size_t bytes = position * static_cast<size_t>(total - past_len);
  const size_t stride = position * static_cast<size_t>(capacity[axis]);
  const size_t present_row = position * static_cast<size_t>(total);
  auto* dst = static_cast<uint8_t*>(buffer);
  const auto* src = static_cast<const uint8_t*>(present.raw());
  if (bytes)
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * stride + from, src + o * present_row + from, bytes);
  return bytes * static_cast<size_t>(outer);
}

}  // namespace kiln::rt
