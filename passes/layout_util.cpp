#include "passes/layout_util.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"

namespace kiln::layout {

namespace {

bool one_of(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (op == n) return true;
  return false;
}

// A rule with operand 0 as the only image and every result an image.
std::optional<Rule> unary_rule(const Node& n, int rank) {
  Rule r;
  r.rank = rank;
  r.images = {0};
  r.out_images.assign(n.num_outputs(), true);
  return r;
}

// The physical position of channels-first dim `axis` in a channels-last value.
int64_t physical_axis(int64_t axis, int rank) { return axis == 0 ? 0 : axis == 1 ? rank - 1 : axis - 1; }

std::vector<int64_t> permute_ints(const std::vector<int64_t>& v, int rank) {
  return permute_dims(v, channels_last_perm(rank));
}

// A list of begins then ends (pads, roi), each half permuted.
template <typename T>
std::vector<T> permute_halves(const std::vector<T>& v, int rank) {
  Perm p = channels_last_perm(rank);
  std::vector<T> r(v.size());
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < rank; ++i) r[h * rank + i] = v[h * rank + p[i]];
  return r;
}

std::optional<Rule> pointwise_rule(const Node& n) {
  if (n.num_outputs() != 1) return std::nullopt;
  int rank = n.output()->type().rank();
  if (rank < 3) return std::nullopt;
  Rule r;
  r.rank = rank;
  r.out_images = {true};
  bool any_value = false;
  for (int i = 0; i < n.num_inputs(); ++i) {
    const Value* v = n.input(i);
    if (!v) continue;
    // One element broadcasts alike in both layouts (a symbolic shape is never one element).
    if (!has_symbolic_dims(v->shape()) && v->type().numel() == 1 && v->type().rank() <= rank) continue;
    if (v->type().rank() == rank) {
      r.images.push_back(i);
      any_value |= !has_data(v);
    } else if (has_data(v) && v->type().rank() < rank) {
      r.images.push_back(i);  // a constant broadcast against the image: unsqueezed and permuted
    } else {
      return std::nullopt;  // a lower-rank value would need a reshape and a transpose
    }
  }
  if (!any_value) return std::nullopt;
  return r;
}

std::optional<Rule> reduce_rule(const Node& n, int rank) {
  Rule r = *unary_rule(n, rank);
  if (n.attrs().get_int("keepdims", 1) != 0) return r;
  // Without keepdims the result is channels-first-ordered as is when the
  // channel dim or every spatial dim is reduced: the region ends here.
  std::vector<int64_t> axes = n.attrs().get_ints("axes");
  bool channel = false;
  int spatial = 0;
  for (int64_t a : axes) {
    if (a == 1) channel = true;
    else if (a >= 2) ++spatial;
  }
  if (!channel && spatial != rank - 2) return std::nullopt;
  r.out_images = {false};
  return r;
}

}  // namespace

bool has_data(const Value* v) { return v && v->is_constant() && v->has_data(); }

std::optional<Rule> rule_for(const Node& n) {
  if (n.body() || n.attrs().has("layout")) return std::nullopt;
  const OpDef* def = op_registry().find(n.op());
  if (!def || n.num_inputs() == 0 || !n.input(0)) return std::nullopt;
  const int rank = n.input(0)->type().rank();
  const std::string& op = n.op();
  if (def->category == OpCategory::Pointwise) return pointwise_rule(n);
  if (rank < 3) return std::nullopt;
  if (op == "conv") {
    if (!n.input(1) || n.input(1)->type().rank() != rank) return std::nullopt;
    Rule r = *unary_rule(n, rank);
    r.images = {0, 1};  // the weight [M, C/g, k...] becomes [M, k..., C/g]
    r.anchor = true;
    return r;
  }
  if (op == "max_pool") {
    if (n.num_outputs() != 1) return std::nullopt;  // indices address channels-first x
    return unary_rule(n, rank);
  }
  if (one_of(op, {"average_pool", "lp_pool", "global_average_pool", "global_max_pool", "global_lp_pool",
                  "batch_normalization", "instance_normalization", "group_normalization", "resize", "split", "slice",
                  "pad"}))
    return unary_rule(n, rank);
  if (op == "concat") {
    Rule r = *unary_rule(n, rank);
    r.images.clear();
    for (int i = 0; i < n.num_inputs(); ++i) {
      if (!n.input(i) || n.input(i)->type().rank() != rank) return std::nullopt;
      r.images.push_back(i);
    }
    return r;
  }
  if (op.rfind("reduce_", 0) == 0 && def->keeps_layout && n.attrs().has("axes")) return reduce_rule(n, rank);
  return std::nullopt;
}

void set_nhwc_attrs(Node& n, const Rule& r) {
  AttrMap& a = n.attrs();
  const std::string& op = n.op();
  const int rank = r.rank;
  if (op == "concat" || op == "split") {
    a.set("axis", physical_axis(normalize_axis(a.require_int("axis"), rank), rank));
  } else if (op == "slice") {
    for (const char* k : {"starts", "ends", "steps"}) a.set(k, permute_ints(a.get_ints(k), rank));
  } else if (op == "pad") {
    a.set("pads", permute_halves(a.get_ints("pads"), rank));
  } else if (op == "resize") {
    a.set("sizes", permute_ints(a.get_ints("sizes"), rank));
    if (a.has("scales")) {
      std::vector<float> s = a.get_floats("scales");
      KILN_CHECK(int(s.size()) == rank, "{}: scales has {} entries for rank {}", n.describe(), s.size(), rank);
      Perm p = channels_last_perm(rank);
      std::vector<float> ps(rank);
      for (int i = 0; i < rank; ++i) ps[i] = s[p[i]];
      a.set("scales", ps);
    }
    if (a.has("roi")) a.set("roi", permute_halves(a.get_floats("roi"), rank));
  } else if (op.rfind("reduce_", 0) == 0) {
    std::vector<int64_t> axes = a.get_ints("axes");
    for (int64_t& x : axes) x = physical_axis(x, rank);
    std::sort(axes.begin(), axes.end());
    a.set("axes", axes);
  } else if (op_registry().get(op).category != OpCategory::Pointwise) {
    a.set("layout", std::string("nhwc"));
  }
}

Perm compose(const Perm& first, const Perm& second) {
  KILN_CHECK(first.size() == second.size(), "composing perms of ranks {} and {}", first.size(), second.size());
  Perm r(second.size());
  for (size_t i = 0; i < second.size(); ++i) r[i] = first[second[i]];
  return r;
}

bool is_identity(const Perm& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

namespace {

// dst (row-major over `out`) gets src read with strides `sstride` per dim of out.
template <typename E>
void gather_transposed(const E* src, E* dst, const Shape& out, const std::vector<int64_t>& sstride) {
  const int rank = static_cast<int>(out.size());
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = out[rank - 1], step = sstride[rank - 1];
  if (inner == 0) return;
  const int64_t outer = shape_numel(out) / inner;
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t o = 0; o < outer; ++o) {
    const E* s = src + off;
    E* d = dst + o * inner;
    for (int64_t j = 0; j < inner; ++j) d[j] = s[j * step];
    for (int k = rank - 2; k >= 0; --k) {
      off += sstride[k];
      if (++idx[k] < out[k]) break;
      off -= sstride[k] * out[k];
      idx[k] = 0;
    }
  }
}

}  // namespace

Tensor transpose_tensor(const Tensor& t, const Perm& perm, Layout layout) {
  Shape out = permute_dims(t.shape(), perm);
  Tensor r(TensorType(t.dtype(), out, layout));
  if (r.numel() == 0) return r;
  const std::vector<int64_t> ist = strides_of(t.shape());
  std::vector<int64_t> sstride(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) sstride[i] = ist[perm[i]];
  switch (dtype_size(t.dtype())) {
    case 1:
      gather_transposed(t.data<uint8_t>(), r.data<uint8_t>(), out, sstride);
      break;
    case 2:
      gather_transposed(t.data<uint16_t>(), r.data<uint16_t>(), out, sstride);
      break;
    case 4:
      gather_transposed(t.data<uint32_t>(), r.data<uint32_t>(), out, sstride);
      break;
    case 8:
      gather_transposed(t.data<uint64_t>(), r.data<uint64_t>(), out, sstride);
      break;
    default:
      KILN_CHECK(false, "transpose of {}: unexpected element size", t.type().str());
  }
  return r;
}

Tensor to_channels_last(const Tensor& t, int rank) {
  Shape s = t.shape();
  KILN_CHECK(int(s.size()) <= rank, "constant {} has a rank above {}", t.type().str(), rank);
  s.insert(s.begin(), rank - s.size(), 1);
  return transpose_tensor(t.reshaped(s), channels_last_perm(rank), Layout::NHWC);
}

bool same_order_both_layouts(const Shape& cl) {
  if (cl.size() < 3) return true;
  if (cl.back() == 1) return true;
  // The spatial dims hold one element only when each is a static 1: a
  // symbolic dim (an interned id, not a size) may be 1 at one shape of the
  // range but not at another, so it decides "not the same order".
  for (size_t i = 1; i + 1 < cl.size(); ++i)
    if (is_symbolic_dim(cl[i]) || cl[i] != 1) return false;
  return true;
}

}  // namespace kiln::layout
