// ONNX adapters for the shape family (see import_context.h): every opset form
// is turned into one canonical static kiln op, with compile-time operands
// (shapes, axes, repeats) hoisted into attributes. Slice and Pad are in
// adapters_slice_pad.cpp; Shape, Size, ConstantOfShape and Constant in
// adapters_constants.cpp.
//
//   Reshape, Flatten, Squeeze, Unsqueeze -> reshape {shape}
//   Transpose -> transpose {perm}        Concat -> concat {axis}
//   Split -> split {axis, split}         Expand -> expand {shape}
//   Tile -> tile {repeats}               Range -> range
//   DepthToSpace -> depth_to_space       SpaceToDepth -> space_to_depth
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "frontend/import_context.h"
#include "frontend/reshape_target.h"
#include "frontend/shape_operands.h"
#include "ir/data_dependent.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/shape_ops.h"

namespace kiln::adapters {

namespace {

Value* emit_reshape(ImportContext& c, Value* x, const Shape& s) {
  AttrMap a;
  a.set("shape", std::vector<int64_t>(s));
  return c.emit1("reshape", {x}, a);
}

// ---------------------------------------------------------------------------
// Reshape family

void reshape_adapter(ImportContext& c) {
  std::vector<int64_t> spec;
  if (c.opset() < 5) {
    c.only_attrs({"shape", "consumed_inputs"});
    if (!c.attrs().has("shape")) c.fail("attribute 'shape' is missing");
    spec = c.attrs().get_ints("shape");
  } else {
    c.only_attrs({"allowzero"});
    spec = int_list(c, 1, "Reshape shape", false, /*allow_symbolic=*/true);
  }
  int64_t allowzero = c.attrs().get_int("allowzero", 0);
  if (allowzero != 0 && allowzero != 1) c.fail("allowzero must be 0 or 1, got {}", allowzero);
  Value* x = c.input(0);
  c.set_outputs({emit_reshape(c, x, resolve_reshape(c, x->shape(), spec, allowzero == 1))});
}

void flatten_adapter(ImportContext& c) {
  c.only_attrs({"axis"});
  Value* x = c.input(0);
  int r = x->type().rank();
  int64_t axis = c.attrs().get_int("axis", 1);
  if (axis < 0 && c.opset() >= 11) axis += r;
  if (axis < 0 || axis > r) c.fail("axis {} is out of range for rank {}", c.attrs().get_int("axis", 1), r);
  const Shape& s = x->shape();
  Shape out;
  try {
    // (products of symbolic dims are polynomials: [batch,8,1,1] -> [batch,8])
    auto count = [&](Shape part) { return has_symbolic_dims(part) ? dim_product(part) : shape_numel(part); };
    out = {count(Shape(s.begin(), s.begin() + axis)), count(Shape(s.begin() + axis, s.end()))};
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  c.set_outputs({emit_reshape(c, x, out)});
}

std::vector<int64_t> axes_operand(ImportContext& c, int first_input_opset, const char* op, bool* given) {
  *given = false;
  if (c.opset() < first_input_opset) {
    c.only_attrs({"axes"});
    *given = c.attrs().has("axes");
    return c.attrs().get_ints("axes");
  }
  c.only_attrs({});
  if (!c.has_input(1)) return {};
  *given = true;
  return int_list(c, 1, std::string(op) + " axes", true);
}

void squeeze_adapter(ImportContext& c) {
  bool given = false;
  std::vector<int64_t> axes = axes_operand(c, 13, "Squeeze", &given);
  Value* x = c.input(0);
  const Shape& s = x->shape();
  std::vector<bool> drop(s.size(), false);
  if (!given) {
    // Which dims are 1 decides the result's rank: a symbolic dim may be 1 at
    // run time or not, so kiln does not guess.
    if (int k = first_symbolic_dim(s); k >= 0)
      c.unsupported("Squeeze without axes on {}: whether dim {} ({}) is 1 is known only at run time", x->type().str(),
                    k, dim_str(s[k]));
    for (size_t i = 0; i < s.size(); ++i) drop[i] = s[i] == 1;
  } else {
    for (int64_t a : norm_axes(c, axes, x->type().rank(), "axis")) {
      if (s[a] != 1) c.fail("cannot squeeze dim {} of {}: it is {}, not 1", a, x->type().str(), s[a]);
      drop[a] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < s.size(); ++i)
    if (!drop[i]) out.push_back(s[i]);
  c.set_outputs({emit_reshape(c, x, out)});
}

void unsqueeze_adapter(ImportContext& c) {
  bool given = false;
  std::vector<int64_t> axes = axes_operand(c, 13, "Unsqueeze", &given);
  if (!given) c.fail("axes are missing");
  Value* x = c.input(0);
  const Shape& s = x->shape();
  int out_rank = x->type().rank() + static_cast<int>(axes.size());
  std::vector<bool> is_new(out_rank, false);
  for (int64_t a : norm_axes(c, axes, out_rank, "axis")) is_new[a] = true;
  Shape out;
  size_t k = 0;
  for (int i = 0; i < out_rank; ++i) out.push_back(is_new[i] ? 1 : s[k++]);
  c.set_outputs({emit_reshape(c, x, out)});
}

// ---------------------------------------------------------------------------
// Transpose, Concat, Split

void transpose_adapter(ImportContext& c) {
  c.only_attrs({"perm"});
  int r = c.input(0)->type().rank();
  std::vector<int64_t> perm;
  if (c.attrs().has("perm")) {
    perm = c.attrs().get_ints("perm");
  } else {
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  }
  AttrMap a;
  a.set("perm", perm);
  c.set_outputs({c.emit1("transpose", {c.input(0)}, a)});
}

void concat_adapter(ImportContext& c) {
  c.only_attrs({"axis"});
  if (c.opset() >= 4 && !c.attrs().has("axis")) c.fail("attribute 'axis' is missing");
  int64_t axis = c.attrs().get_int("axis", 1);  // Concat-1 defaults to 1
  std::vector<Value*> ins;
  for (int i = 0; i < c.num_inputs(); ++i) ins.push_back(c.input(i));
  if (ins.empty()) c.fail("needs at least one operand");
  int r = ins[0]->type().rank();
  if (r == 0) c.fail("cannot concatenate scalars");
  int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r) c.fail("axis {} is out of range for rank {}", axis, r);
  AttrMap m;
  m.set("axis", a);
  c.set_outputs({c.emit1("concat", ins, m)});
}

void split_adapter(ImportContext& c) {
  Value* x = c.input(0);
  int r = x->type().rank();
  if (r == 0) c.fail("cannot split a scalar");
  std::vector<int64_t> split;
  bool have_split = false;
  int64_t num_outputs = 0;
  if (c.opset() >= 13) {
    c.only_attrs(c.opset() >= 18 ? std::initializer_list<const char*>{"axis", "num_outputs"}
                                 : std::initializer_list<const char*>{"axis"});
    if (c.has_input(1)) {
      split = int_list(c, 1, "Split sizes");
      have_split = true;
    }
    num_outputs = c.attrs().get_int("num_outputs", 0);
    if (have_split && c.attrs().has("num_outputs")) c.fail("both a split operand and num_outputs are given");
  } else {
    c.only_attrs({"axis", "split"});
    if (c.attrs().has("split")) {
      split = c.attrs().get_ints("split");
      have_split = true;
    } else if (c.opset() < 2 && c.has_input(1)) {  // Split-1 took the sizes as an optional operand too
      split = int_list(c, 1, "Split sizes");
      have_split = true;
    }
  }
  int64_t axis = c.attrs().get_int("axis", 0);
  int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r) c.fail("axis {} is out of range for rank {}", axis, r);
  int64_t dim = x->shape()[a];
  int n = c.num_outputs();
  if (!have_split) {
    // Equal parts of a dim known only at run time would have run-time sizes
    // (explicit sizes over it are checked when it runs: split_op).
    if (is_symbolic_dim(dim))
      c.unsupported("splitting {} into equal parts along its symbolic dim {} ({}) is not supported yet",
                    x->type().str(), a, dim_str(dim));
    if (c.attrs().has("num_outputs")) {
      if (num_outputs <= 0) c.fail("num_outputs {} must be positive", num_outputs);
      if (num_outputs != n) c.fail("num_outputs is {} but the node has {} outputs", num_outputs, n);
      // Opset 18: chunks of ceil(dim / n), the last one smaller.
      int64_t chunk = (dim + n - 1) / n;
      for (int i = 0; i < n; ++i) split.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
      int64_t sum = 0;
      for (int64_t s : split) sum += s;
      if (sum != dim) c.fail("dim {} of size {} cannot be split into {} chunks", a, dim, n);
    } else {
      if (n <= 0) c.fail("has no outputs");
      if (dim % n != 0) c.fail("dim {} of size {} does not split into {} equal parts", a, dim, n);
      split.assign(n, dim / n);
    }
  }
  if (static_cast<int>(split.size()) != n)
    c.fail("split [{}] has {} parts but the node has {} outputs", fmt::join(split, ","), split.size(), n);
  AttrMap m;
  m.set("axis", a);
  m.set("split", split);
  c.set_outputs(c.emit("split", {x}, m, n));
}

// ---------------------------------------------------------------------------
// Expand, Tile

void expand_adapter(ImportContext& c) {
  c.only_attrs({});
  Value* x = c.input(0);
  // The target may hold symbolic dims ([1, kv, 2, past+seq, 16], a decoder's
  // grouped-query heads repeated over its whole cache).
  std::vector<int64_t> spec = int_list(c, 1, "Expand shape", false, true);
  for (int64_t v : spec)
    if (v < 0 && !is_symbolic_dim(v)) c.fail("Expand shape [{}] has a negative dim", dims_str(spec));
  Shape out;
  try {
    out = broadcast_shapes(x->shape(), spec);
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  AttrMap m;
  m.set("shape", out);
  c.set_outputs({c.emit1("expand", {x}, m)});
}

void tile_adapter(ImportContext& c) {
  c.only_attrs({});
  Value* x = c.input(0);
  int r = x->type().rank();
  std::vector<int64_t> repeats;
  if (c.opset() < 6) {
    // Tile-1: operands (input, tiles, axis), both scalars.
    std::vector<int64_t> tiles = int_list(c, 1, "Tile tiles", true), axis = int_list(c, 2, "Tile axis", true);
    if (tiles.size() != 1 || axis.size() != 1) c.fail("tiles and axis must be scalars");
    repeats.assign(r, 1);
    repeats[norm_axes(c, axis, r, "axis")[0]] = tiles[0];
  } else {
    repeats = int_list(c, 1, "Tile repeats");
    if (static_cast<int>(repeats.size()) != r)
      c.fail("repeats has {} values for the rank {} input {}", repeats.size(), r, x->type().str());
  }
  AttrMap m;
  m.set("repeats", repeats);
  c.set_outputs({c.emit1("tile", {x}, m)});
}

// ---------------------------------------------------------------------------
// Range, DepthToSpace, SpaceToDepth

void range_adapter(ImportContext& c) {
  // `stash_type` (opset 27+): the type f16/bf16 ranges are computed in
  // before rounding, float by default. kiln computes start + i * delta in
  // double and rounds once; float or double stashes agree with that.
  c.only_attrs(c.opset() >= 27 ? std::initializer_list<const char*>{"stash_type"}
                               : std::initializer_list<const char*>{});
  int64_t stash = c.attrs().get_int("stash_type", onnx::TensorProto::FLOAT);
  if (stash != onnx::TensorProto::FLOAT && stash != onnx::TensorProto::DOUBLE)
    c.unsupported("stash_type {} (not float or double) is not supported", stash);
  c.set_outputs({c.emit1("range", {c.input(0), c.input(1), c.input(2)})});
}

void depth_to_space_adapter(ImportContext& c) {
  c.only_attrs(c.opset() >= 11 ? std::initializer_list<const char*>{"blocksize", "mode"}
                               : std::initializer_list<const char*>{"blocksize"});
  if (!c.attrs().has("blocksize")) c.fail("attribute 'blocksize' is missing");
  AttrMap m;
  m.set("blocksize", c.attrs().get_int("blocksize", 0));
  m.set("mode", c.attrs().get_string("mode", "DCR"));
  c.set_outputs({c.emit1("depth_to_space", {c.input(0)}, m)});
}

// SpaceToDepth orders the moved blocks depth-column-row (DCR, kiln's
// space_to_depth). Opset 28 adds `mode` CRD (column-row-depth, the inverse
// of DepthToSpace CRD): a reshape to [N, C, H/b, b, W/b, b], a transpose
// to [N, C, b, b, H/b, W/b] and a reshape to [N, C*b*b, H/b, W/b].
void space_to_depth_adapter(ImportContext& c) {
  c.only_attrs(c.opset() >= 28 ? std::initializer_list<const char*>{"blocksize", "mode"}
                               : std::initializer_list<const char*>{"blocksize"});
  if (!c.attrs().has("blocksize")) c.fail("attribute 'blocksize' is missing");
  int64_t b = c.attrs().get_int("blocksize", 0);
  std::string mode = c.attrs().get_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") c.fail("mode must be \"DCR\" or \"CRD\", not \"{}\"", mode);
  Value* x = c.input(0);
  if (mode == "DCR") {
    AttrMap m;
    m.set("blocksize", b);
    return c.set_outputs({c.emit1("space_to_depth", {x}, m)});
  }
  const Shape& s = x->shape();
  if (s.size() != 4) c.fail("expects a rank-4 input, got {}", x->type().str());
  if (b <= 0) c.fail("blocksize must be positive, not {}", b);
  if (s[2] % b || s[3] % b) c.fail("blocksize {} does not divide the spatial dims of {}", b, x->type().str());
  AttrMap r1, tr, r2;
  r1.set("shape", std::vector<int64_t>{s[0], s[1], s[2] / b, b, s[3] / b, b});
  tr.set("perm", std::vector<int64_t>{0, 1, 3, 5, 2, 4});
  r2.set("shape", std::vector<int64_t>{s[0], s[1] * b * b, s[2] / b, s[3] / b});
  Value* y = c.emit1("transpose", {c.emit1("reshape", {x}, r1)}, tr);
  c.set_outputs({c.emit1("reshape", {y}, r2)});
}

}  // namespace

void register_shape(AdapterTable& t) {
  t.add("Reshape", reshape_adapter);
  t.add("Flatten", flatten_adapter);
  t.add("Squeeze", squeeze_adapter);
  t.add("Unsqueeze", unsqueeze_adapter);
  t.add("Transpose", transpose_adapter);
  t.add("Concat", concat_adapter);
  t.add("Split", split_adapter);
  t.add("Expand", expand_adapter);
  t.add("Tile", tile_adapter);
  t.add("Range", range_adapter);
  t.add("DepthToSpace", depth_to_space_adapter);
  t.add("SpaceToDepth", space_to_depth_adapter);
}

}  // namespace kiln::adapters
