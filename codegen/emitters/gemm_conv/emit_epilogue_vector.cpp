// Epilogue::vector_code: the epilogue of `width` consecutive elements of one
// row with 16-byte loads and stores (docs/codegen.md, "Vectorized GEMM/conv
// epilogues"). The scalar form (emit_epilogue.cpp) stores one element per
// statement, each with its own bias/residual load: a warp's store is 64
// bytes of f16 per instruction, and the loads are as narrow. Here the values
// of the group are arrays over the `width` elements; an operand is read as
// one kiln_vec of `width` elements where it varies along the row, once where
// it does not.
#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/emitters/gemm_conv/emit_epilogue.h"
#include "codegen/emitters/gemm_conv/epilogue_place.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "codegen/core/size_expr.h"

namespace kiln::codegen {

namespace {

// How an operand of a pointwise op is read by the `width` elements of a row.
enum class RowRead { Vector, Once };

// The operand's element offset for row-major position `pos` of shape `os`:
// statements into `b` (coordinates as `<p>_<d>`), the offset expression returned.
std::string broadcast_offset(const std::string& pos, const Shape& os, const std::vector<int64_t>& strides,
                             const std::string& p, const char* idx, const std::string& ind, std::string& b) {
  std::string off;
  b += fmt::format("{}{} {}_r = {};\n", ind, idx, p, pos);
  for (int d = static_cast<int>(os.size()) - 1; d >= 0; --d) {
    const std::string c = fmt::format("{}_{}", p, d);
    b += fmt::format("{}const {} {} = {}_r % {}; {}_r /= {};\n", ind, idx, c, p, os[d], p, os[d]);
    b += fmt::format("{}(void){};\n", ind, c);
    if (strides[d] == 0) continue;
    off += fmt::format("{}{}", off.empty() ? "" : " + ",
                       strides[d] == 1 ? c : fmt::format("{} * ({}){}", c, idx, strides[d]));
  }
  return off.empty() ? "0" : off;
}

}  // namespace

std::string vector_load_statements(const std::string& dst, DType t, const std::string& buf, const std::string& off,
                                   const std::string& width, const std::string& ind) {
  const std::string_view st = cuda_storage_type(t);
  const std::string ind2 = ind + "  ";
  std::string s = fmt::format("{}{} {}[{}];\n", ind, st, dst, width);
  s += fmt::format("{}if (KILN_PTR_ADDR({}) % ({} * {}) == 0) {{\n", ind, buf, dtype_size(t), width);
  s += fmt::format("{}typedef const kiln_vec<{}, {}> {}_t;\n", ind2, st, width, dst);
  s += fmt::format("{}const {}_t w = *KILN_PTR_CAST({}_t, {} + {});\n", ind2, dst, dst, buf, off);
  s += fmt::format("{}#pragma unroll\n{}for (int j = 0; j < {}; ++j) {}[j] = w.v[j];\n", ind2, ind2, width, dst);
  s += fmt::format("{}}} else {{\n", ind);
  s += fmt::format("{}#pragma unroll\n{}for (int j = 0; j < {}; ++j) {}[j] = {}[{} + j];\n", ind2, ind2, width, dst,
                   buf, off);
  return s + ind + "}\n";
}

// Which epilogue values keep a vector's `width` anchor elements consecutive
// (`contig`): elements e .. e + width - 1 of the anchor (e a multiple of width,
// in one row) are elements q .. q + width - 1 of the value, q a multiple of
// width in one row of it (its last dim a multiple of width), all in the value
// or all outside it. Reshapes keep that while the last dim stays a multiple
// of width, a transpose while it keeps the last axis last, a split or slice
// while the last axis is cut at multiples of width, a one-index gather while
// its axis is not the last. A value without it (say a transpose that moves
// the GEMM's N axis) may still be stored, element by element; false where a
// pointwise op would read one, or an op is not pointwise or layout.
bool Epilogue::vector_contiguity(int width, std::unordered_map<const kiln::Value*, bool>& contig) const {
  // A symbolic row length is not a known multiple of the width: element by element.
  auto row_ok = [&](const Shape& s) { return !s.empty() && !is_symbolic_dim(s.back()) && s.back() % width == 0; };
  if (!row_ok(anchor_->output(0)->shape())) return false;
  contig[anchor_->output(0)] = true;
  for (const Node* bn : epilogue_nodes()) {
    bool in = true;  // every epilogue value it reads is contiguous
    for (Value* v : bn->inputs())
      if (auto it = contig.find(v); it != contig.end()) in = in && it->second;
    const std::string& op = bn->op();
    const Shape& is = bn->input(0) ? bn->input(0)->shape() : Shape{};
    const int r = static_cast<int>(is.size());
    if (op == "reshape" || op == "identity") {
      contig[bn->output(0)] = in && row_ok(bn->output(0)->shape());
    } else if (op == "transpose") {
      const std::vector<int64_t> perm = bn->attrs().get_ints("perm");
      contig[bn->output(0)] = in && !perm.empty() && perm.back() == r - 1;
    } else if (op == "split") {
      const int a = normalize_axis(bn->attrs().require_int("axis"), r, "split axis");
      bool keep = in;
      for (Value* o : bn->outputs()) keep = keep && (a != r - 1 || o->shape()[a] % width == 0);
      for (Value* o : bn->outputs()) contig[o] = keep;
    } else if (op == "slice") {
      const std::vector<int64_t> st = bn->attrs().get_ints("starts"), sp = bn->attrs().get_ints("steps");
      const Shape& os = bn->output(0)->shape();
      bool keep = in && static_cast<int>(st.size()) == r && static_cast<int>(sp.size()) == r && r > 0;
      if (keep && !(st[r - 1] == 0 && sp[r - 1] == 1 && os[r - 1] == is[r - 1]))
        keep = sp[r - 1] == 1 && st[r - 1] % width == 0 && os[r - 1] % width == 0;
      contig[bn->output(0)] = keep;
    } else if (op == "gather") {
      const int a = normalize_axis(bn->attrs().get_int("axis", 0), r, "gather axis");
      contig[bn->output(0)] = in && a != r - 1 && row_ok(bn->output(0)->shape());
    } else {
      const OpDef* def = ops_->find(op);
      if (!def || def->category != OpCategory::Pointwise || !def->expr || bn->body() || !in) return false;
      if (!row_ok(bn->output(0)->shape())) return false;
      contig[bn->output(0)] = true;
    }
  }
  return true;
}

int Epilogue::vector_width() const {
  std::vector<DType> moved;
  for (const TensorType& t : results_) moved.push_back(t.dtype);
  for (const Node* bn : epilogue_nodes()) {
    const OpDef* def = ops_->find(bn->op());
    if (!def || def->category != OpCategory::Pointwise) continue;
    for (Value* v : bn->inputs()) {
      const auto it = std::find(slot_values_.begin(), slot_values_.end(), v);
      if (it == slot_values_.end()) continue;  // an epilogue value
      const Shape& os = bn->output(0)->shape();
      // Over a symbolic shape (a dynamic batch) only an operand of the element's own shape (a
      // residual) is vectorized: a broadcast one would need its coordinates split by the symbols.
      if (has_symbolic_dims(os)) {
        if (v->shape() != os) return 0;
        moved.push_back(v->dtype());
        continue;
      }
      if (v->type().numel() > 1 && !os.empty() && broadcast_strides(v->shape(), os).back() == 1)
        moved.push_back(v->dtype());
    }
  }
  size_t widest = 1;
  for (DType t : moved) {
    if (is_low_bit(t) || dtype_size(t) > 4) return 0;
    widest = std::max(widest, dtype_size(t));
  }
  const int width = static_cast<int>(16 / widest);
  std::unordered_map<const kiln::Value*, bool> contig;
  return vector_contiguity(width, contig) ? width : 0;
}

// Whether an operand of shape `in` read at the coordinates of `out` holds
// more than one element and moves with the column (its last broadcast
// stride 1): one access per element, not one per row. Symbolic shapes
// (a shape-generic kernel) are not one element.
namespace {
bool reads_along_columns(const Shape& in, const Shape& out) {
  if (has_symbolic_dims(in) || has_symbolic_dims(out))
    return !in.empty() && !out.empty() && symbolic_broadcast_strides(in, out).back() == 1;
  return shape_numel(in) > 1 && broadcast_strides(in, out).back() == 1;
}
}  // namespace

int Epilogue::vector_accesses() const {
  // A result stored element by element (not contiguous) takes `width` accesses per `width` elements.
  const int width = vector_width();
  std::unordered_map<const kiln::Value*, bool> contig;
  if (width > 1) vector_contiguity(width, contig);
  const std::vector<kiln::Value*> outs = body_ ? body_->outputs() : std::vector<kiln::Value*>{anchor_->output(0)};
  int n = 0;
  for (const kiln::Value* o : outs) n += width > 1 && !contig[o] ? width : 1;
  if (body_)
    for (const auto& bn : body_->nodes())
      for (Value* v : bn->inputs())
        if (bn.get() != anchor_ && std::find(slot_values_.begin(), slot_values_.end(), v) != slot_values_.end() &&
            reads_along_columns(v->shape(), bn->output(0)->shape()))
          ++n;
  return n;
}

int Epilogue::scalar_accesses() const {
  int n = static_cast<int>(results_.size());
  if (body_)
    for (const auto& bn : body_->nodes())
      for (Value* v : bn->inputs())
        if (bn.get() != anchor_ && std::find(slot_values_.begin(), slot_values_.end(), v) != slot_values_.end()) ++n;
  return n;
}

int Epilogue::bytes_per_element() const {
  size_t n = 0;
  for (const TensorType& t : results_) n += dtype_size(t.dtype);
  if (body_)
    for (const auto& bn : body_->nodes())
      for (Value* v : bn->inputs())
        if (bn.get() != anchor_ && std::find(slot_values_.begin(), slot_values_.end(), v) != slot_values_.end() &&
            reads_along_columns(v->shape(), bn->output(0)->shape()))
          n += dtype_size(v->dtype());
  return static_cast<int>(n);
}

std::string Epilogue::vector_code(const std::string& accs, const std::string& index0, int V,
                                  const std::string& ind0) const {
  KILN_CHECK(V > 1 && V == vector_width(), "codegen epilogue: vector width {} (the epilogue allows {})", V,
             vector_width());
  std::unordered_map<const kiln::Value*, bool> contig;
  vector_contiguity(V, contig);
  const char* idx = index_type();
  const std::string ind = ind0 + "  ", ind2 = ind + "  ";
  const std::string unroll = ind + "#pragma unroll\n";
  std::string b = ind0 + "{\n";
  const TensorType& at = anchor_->output(0)->type();
  b += fmt::format("{}const {} e_p0 = {};\n", ind, idx, index0);
  b += fmt::format("{}{} e_v0[{}];\n", ind, cuda_storage_type(at.dtype), V);
  b += fmt::format("{}for (int j = 0; j < {}; ++j) e_v0[j] = {};\n", unroll + ind, V,
                   cuda_store(at.dtype, accs + "[j]"));
  // Each value of the group: the place of the vector's first element in it (the layout ops map
  // it as the scalar form does; a contiguous value holds the others next to it) and its array.
  std::unordered_map<const kiln::Value*, EpiloguePlace> place;
  place[anchor_->output(0)] = EpiloguePlace{"true", "e_p0", "e_v0", at.dtype, at.shape};
  auto first_source = [&](const Node* bn,
                          const std::unordered_map<const kiln::Value*, EpiloguePlace>& pl) -> const EpiloguePlace& {
    for (Value* v : bn->inputs())
      if (pl.count(v)) return pl.at(v);
    fail("codegen epilogue: {} reads no epilogue value", bn->describe());
  };
  auto vector_load = [&](const std::string& dst, DType t, const std::string& buf, const std::string& off) {
    return vector_load_statements(dst, t, buf, off, std::to_string(V), ind);
  };
  int counter = 1;
  for (const Node* bn : epilogue_nodes()) {
    const int id = counter++;
    const EpiloguePlace& src = first_source(bn, place);
    if (bn->op() == "reshape" || bn->op() == "identity" || bn->op() == "transpose" || bn->op() == "split" ||
        bn->op() == "slice" || bn->op() == "gather") {
      place_layout(*bn, src, fmt::format("e_{{}}{}", id), ind, b, place);
      continue;
    }
    const EpiloguePlace at_src = src;  // (place grows below)
    const OpDef& def = ops_->get(bn->op());
    const Shape& os = bn->output(0)->shape();
    std::vector<DType> dts;
    std::vector<std::string> ins;
    for (int i = 0; i < bn->num_inputs(); ++i) {
      Value* v = bn->input(i);
      dts.push_back(v->dtype());
      if (auto it = place.find(v); it != place.end()) {
        ins.push_back(cuda_load(v->dtype(), it->second.var + "[j]"));
        continue;
      }
      const auto sit = std::find(slot_values_.begin(), slot_values_.end(), v);
      KILN_CHECK(sit != slot_values_.end(), "codegen epilogue: %{} is not a slot", v->name());
      const std::string buf = fmt::format("in{}", sit - slot_values_.begin());
      const std::string a = fmt::format("e_a{}_{}", id, i);
      // (A symbolic operand has the element's shape: vector_width.)
      const bool symbolic = has_symbolic_dims(v->shape());
      const std::vector<int64_t> strides =
          symbolic ? symbolic_broadcast_strides(v->shape(), os) : broadcast_strides(v->shape(), os);
      const bool scalar = !symbolic && v->type().numel() == 1;
      const RowRead how = !scalar && strides.back() == 1 ? RowRead::Vector : RowRead::Once;
      std::string off = "0";
      if (v->shape() == os) off = at_src.pos;
      else if (!scalar) off = broadcast_offset(at_src.pos, os, strides, fmt::format("e_c{}_{}", id, i), idx, ind, b);
      // Elements outside the value (split/slice parts) read the buffer's first elements instead.
      if (at_src.ok != "true" && off != "0") off = fmt::format("({} ? {} : 0)", at_src.ok, off);
      if (how == RowRead::Vector) {
        b += vector_load(a, v->dtype(), buf, off);
        ins.push_back(cuda_load(v->dtype(), a + "[j]"));
      } else {
        b += fmt::format("{}const {} {} = {}[{}];\n", ind, cuda_storage_type(v->dtype()), a, buf, off);
        ins.push_back(cuda_load(v->dtype(), a));
      }
    }
    ExprBuilder eb(dts);
    Expr ex = def.expr(eb, bn->attrs());
    const DType odt = bn->output(0)->dtype();
    KILN_CHECK(ex.result_dtype() == odt, "codegen epilogue: {}: expression gives {}, inferred {}", bn->describe(),
               dtype_name(ex.result_dtype()), dtype_name(odt));
    const std::string vv = fmt::format("e_v{}", id);
    b += fmt::format("{}{} {}[{}];\n", ind, cuda_storage_type(odt), vv, V);
    b += fmt::format("{}for (int j = 0; j < {}; ++j) {{\n", unroll + ind, V);
    std::string body;
    const std::string res = emit_expr(ex, ins, fmt::format("e_x{}_", id), ind2, body);
    b += body;
    b += fmt::format("{}{}[j] = {};\n{}}}\n", ind2, vv, cuda_store(odt, res), ind);
    place[bn->output(0)] = EpiloguePlace{at_src.ok, at_src.pos, vv, odt, os};
  }
  const std::vector<kiln::Value*> outs = body_ ? body_->outputs() : std::vector<kiln::Value*>{anchor_->output(0)};
  for (size_t r = 0; r < outs.size(); ++r) {
    const EpiloguePlace& pl = place.at(outs[r]);
    KILN_CHECK(pl.dtype == results_[r].dtype, "codegen epilogue: result {} is {}, the value {}", r,
               dtype_name(results_[r].dtype), dtype_name(pl.dtype));
    const std::string_view st = cuda_storage_type(pl.dtype);
    if (!contig.at(outs[r])) {
      // Its elements are not next to each other (a transpose moved the row's axis, a gather picks one
      // element of it): each one's place is mapped on its own and stored alone.
      b += fmt::format("{}for (int j = 0; j < {}; ++j) {{\n", unroll + ind, V);
      std::unordered_map<const kiln::Value*, EpiloguePlace> one;
      b += fmt::format("{}const {} e_q0 = e_p0 + j;\n", ind2, idx);
      one[anchor_->output(0)] = EpiloguePlace{"true", "e_q0", "", at.dtype, at.shape};
      int qid = 1;
      for (const Node* bn : epilogue_nodes()) {
        const int id = qid++;
        const EpiloguePlace& src = first_source(bn, one);
        if (bn->op() == "reshape" || bn->op() == "identity" || bn->op() == "transpose" || bn->op() == "split" ||
            bn->op() == "slice" || bn->op() == "gather")
          place_layout(*bn, src, fmt::format("e_q{{}}{}", id), ind2, b, one);
        else one[bn->output(0)] = EpiloguePlace{src.ok, src.pos, "", bn->output(0)->dtype(), bn->output(0)->shape()};
      }
      const EpiloguePlace& q = one.at(outs[r]);
      b += fmt::format("{}{}out{}[{}] = {}[j];\n{}}}\n", ind2, q.ok == "true" ? "" : fmt::format("if ({}) ", q.ok), r,
                       q.pos, pl.var, ind);
      continue;
    }
    // Contiguous: one kiln_vec store where the buffer's address allows, else element by element; all
    // of the vector is in the value or none of it (a split's other parts).
    const bool guarded = pl.ok != "true";
    const std::string si = guarded ? ind2 : ind, si2 = si + "  ";
    if (guarded) b += fmt::format("{}if ({}) {{\n", ind, pl.ok);
    b += fmt::format("{}if (KILN_PTR_ADDR(out{}) % {} == 0) {{\n", si, r, dtype_size(pl.dtype) * V);
    b += fmt::format("{}typedef kiln_vec<{}, {}> e_o{}_t;\n{}e_o{}_t w;\n", si2, st, V, r, si2, r);
    b += fmt::format("{}#pragma unroll\n{}for (int j = 0; j < {}; ++j) w.v[j] = {}[j];\n", si2, si2, V, pl.var);
    b += fmt::format("{}*KILN_PTR_CAST(e_o{}_t, out{} + {}) = w;\n", si2, r, r, pl.pos);
    b += fmt::format("{}}} else {{\n{}#pragma unroll\n{}for (int j = 0; j < {}; ++j) out{}[{} + j] = {}[j];\n{}}}\n",
                     si, si2, si2, V, r, pl.pos, pl.var, si);
    if (guarded) b += ind + "}\n";
  }
  return b + ind0 + "}\n";
}

}  // namespace kiln::codegen
