#include "frontend/symbolic_values.h"

#include <optional>
#include <set>
#include <string_view>

#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"

namespace kiln {

namespace {

// Shape values are short; longer i64 tensors are data, never searched.
constexpr int64_t kMaxShapeValueElements = 1024;

// Ops whose results are operand elements moved, never computed: their
// reference kernels carry symbolic dims through unchanged.
bool moves_elements(std::string_view op) {
  static const std::set<std::string_view> ops = {"reshape",   "concat", "gather", "slice",
                                                 "transpose", "split",  "expand", "tile"};
  return ops.count(op) > 0;
}

// Whether a == b for every value of the symbols (true), for none (false),
// or depends on them (nullopt). Symbols are >= 0, so a difference whose
// coefficients all have the sign of its nonzero constant term never is 0.
std::optional<bool> values_equal(int64_t a, int64_t b) {
  if (a == b) return true;
  const DimPoly d = dim_poly(value_sub(a, b));
  auto c = d.find(DimMonomial{});
  const int64_t constant = c == d.end() ? 0 : c->second;
  if (constant == 0) return std::nullopt;
  for (const auto& [mono, coef] : d)
    if ((coef > 0) != (constant > 0)) return std::nullopt;
  return false;
}

// Element k of an operand of shape `in` broadcast to `out`.
struct Broadcast {
  std::vector<int64_t> in_strides, out_strides;
  Broadcast(const Shape& in, const Shape& out) : in_strides(broadcast_strides(in, out)), out_strides(strides_of(out)) {}
  int64_t at(int64_t k) const {
    int64_t i = 0;
    for (size_t d = 0; d < out_strides.size(); ++d) {
      const int64_t idx = out_strides[d] ? k / out_strides[d] : 0;
      k -= idx * out_strides[d];
      i += idx * in_strides[d];
    }
    return i;
  }
};

// equal on shape values (bool result) and where choosing between them (a
// plain bool condition): torch's export of expand writes
// Where(Equal(shape, -1), ones, shape) to replace -1 entries.
std::optional<std::vector<Tensor>> compare_or_select(const std::string& op, const std::vector<const Tensor*>& ins,
                                                     const std::vector<TensorType>& types) {
  if (types.size() != 1) return std::nullopt;
  Tensor out(types[0]);
  const Shape& os = types[0].shape;
  if (op == "equal" && ins.size() == 2 && ins[0] && ins[1] && ins[0]->dtype() == DType::I64 &&
      ins[1]->dtype() == DType::I64 && types[0].dtype == DType::Bool) {
    Broadcast ba(ins[0]->shape(), os), bb(ins[1]->shape(), os);
    for (int64_t k = 0; k < out.numel(); ++k) {
      std::optional<bool> eq = values_equal(ins[0]->data<int64_t>()[ba.at(k)], ins[1]->data<int64_t>()[bb.at(k)]);
      if (!eq) return std::nullopt;
      out.data<uint8_t>()[k] = *eq ? 1 : 0;
    }
    return std::vector<Tensor>{std::move(out)};
  }
  if (op == "where" && ins.size() == 3 && ins[0] && ins[1] && ins[2] && ins[0]->dtype() == DType::Bool &&
      !holds_symbolic_values(*ins[0]) && ins[1]->dtype() == DType::I64 && ins[2]->dtype() == DType::I64 &&
      types[0].dtype == DType::I64) {
    Broadcast bc(ins[0]->shape(), os), ba(ins[1]->shape(), os), bb(ins[2]->shape(), os);
    for (int64_t k = 0; k < out.numel(); ++k)
      out.data<int64_t>()[k] =
          ins[0]->data<uint8_t>()[bc.at(k)] ? ins[1]->data<int64_t>()[ba.at(k)] : ins[2]->data<int64_t>()[bb.at(k)];
    return std::vector<Tensor>{std::move(out)};
  }
  return std::nullopt;
}

}  // namespace

bool holds_symbolic_values(const Tensor& t) {
  if (t.dtype() != DType::I64 || t.numel() > kMaxShapeValueElements || !t.raw()) return false;
  const int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (p[i] < 0 && is_symbolic_dim(p[i])) return true;
  return false;
}

std::string describe_symbolic_values(const Tensor& t) {
  std::vector<std::string> items;
  for (int64_t i = 0; i < t.numel(); ++i) items.push_back(dim_str(t.data<int64_t>()[i]));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

std::optional<std::vector<Tensor>> evaluate_on_symbolic_values(const Node& n, const std::vector<const Tensor*>& ins,
                                                               const std::vector<TensorType>& types,
                                                               const std::string& label) {
  const std::string& op = n.op();
  if (moves_elements(op)) return evaluate_op(op_registry().get(op), n.attrs(), ins, types, label);
  if (op == "cast" && types.size() == 1 && types[0].dtype == DType::I64 && ins.size() == 1 && ins[0] &&
      ins[0]->dtype() == DType::I64)
    return std::vector<Tensor>{*ins[0]};
  if (op == "equal" || op == "where") return compare_or_select(op, ins, types);
  bool arith = op == "add" || op == "sub" || op == "mul" || op == "div";
  if (!arith || ins.size() != 2 || !ins[0] || !ins[1] || types.size() != 1 || types[0].dtype != DType::I64 ||
      ins[0]->dtype() != DType::I64 || ins[1]->dtype() != DType::I64)
    return std::nullopt;
  // Elementwise with numpy broadcasting, on the polynomials.
  Tensor out(types[0]);
  const Shape& os = types[0].shape;
  std::vector<int64_t> sa = broadcast_strides(ins[0]->shape(), os), sb = broadcast_strides(ins[1]->shape(), os);
  std::vector<int64_t> ostr = strides_of(os);
  const int64_t* a = ins[0]->data<int64_t>();
  const int64_t* b = ins[1]->data<int64_t>();
  int64_t* r = out.data<int64_t>();
  try {
    for (int64_t k = 0; k < out.numel(); ++k) {
      int64_t ia = 0, ib = 0, rest = k;
      for (size_t d = 0; d < os.size(); ++d) {
        int64_t idx = ostr[d] ? rest / ostr[d] : 0;
        rest -= idx * ostr[d];
        ia += idx * sa[d];
        ib += idx * sb[d];
      }
      if (op == "add") r[k] = value_add(a[ia], b[ib]);
      else if (op == "sub") r[k] = value_sub(a[ia], b[ib]);
      else if (op == "mul") r[k] = value_mul(a[ia], b[ib]);
      else if (auto q = value_div(a[ia], b[ib])) r[k] = *q;
      else return std::nullopt;  // not exact for every value of the symbols
    }
  } catch (const Error& e) {
    fail("{}: {}", label, e.what());
  }
  return std::vector<Tensor>{std::move(out)};
}

}  // namespace kiln
