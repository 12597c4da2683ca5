#include "ops/symbolic_values.h"

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

// a == b for every value of the symbols (each >= 0): true when the
// polynomials are one, false when their difference has a nonzero constant
// and every coefficient of its sign (so it is never 0: `past+seq` is never
// -1); nullopt when the answer depends on the values.
std::optional<bool> values_equal(int64_t a, int64_t b) {
  if (a == b) return true;
  DimPoly diff = dim_poly(value_sub(a, b));
  auto constant = diff.find(DimMonomial{});
  if (constant == diff.end()) return std::nullopt;
  for (const auto& [mono, coeff] : diff)
    if ((coeff > 0) != (constant->second > 0)) return std::nullopt;
  return false;
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
  // equal and where (what exporters make of expand(x, [b, kv, n, t, d]): a
  // shape whose -1 entries are replaced) decide elementwise from the
  // polynomials; arithmetic computes on them.
  bool arith = op == "add" || op == "sub" || op == "mul" || op == "div";
  bool i64_pair = ins.size() == 2 && ins[0] && ins[1] && ins[0]->dtype() == DType::I64 &&
                  ins[1]->dtype() == DType::I64 && types.size() == 1;
  bool equal = op == "equal" && i64_pair && types[0].dtype == DType::Bool;
  bool where = op == "where" && ins.size() == 3 && ins[0] && ins[1] && ins[2] && ins[0]->dtype() == DType::Bool &&
               ins[1]->dtype() == DType::I64 && ins[2]->dtype() == DType::I64 && types.size() == 1;
  if (!(arith && i64_pair && types[0].dtype == DType::I64) && !equal && !where) return std::nullopt;
  // Elementwise with numpy broadcasting, on the polynomials.
  Tensor out(types[0]);
  const Shape& os = types[0].shape;
  std::vector<std::vector<int64_t>> in_strides;
  for (const Tensor* t : ins) in_strides.push_back(broadcast_strides(t->shape(), os));
  std::vector<int64_t> ostr = strides_of(os);
  try {
    for (int64_t k = 0; k < out.numel(); ++k) {
      int64_t idx_of[3] = {0, 0, 0}, rest = k;
      for (size_t d = 0; d < os.size(); ++d) {
        int64_t idx = ostr[d] ? rest / ostr[d] : 0;
        rest -= idx * ostr[d];
        for (size_t i = 0; i < ins.size(); ++i) idx_of[i] += idx * in_strides[i][d];
      }
      if (where) {
        bool c = ins[0]->data<uint8_t>()[idx_of[0]] != 0;
        out.data<int64_t>()[k] = (c ? ins[1] : ins[2])->data<int64_t>()[idx_of[c ? 1 : 2]];
        continue;
      }
      int64_t a = ins[0]->data<int64_t>()[idx_of[0]], b = ins[1]->data<int64_t>()[idx_of[1]];
      int64_t* r = out.data<int64_t>();
      if (equal) {
        std::optional<bool> e = values_equal(a, b);
        if (!e) return std::nullopt;  // depends on the symbols' values
        out.data<uint8_t>()[k] = *e;
      } else if (op == "add") {
        r[k] = value_add(a, b);
      } else if (op == "sub") {
        r[k] = value_sub(a, b);
      } else if (op == "mul") {
        r[k] = value_mul(a, b);
      } else if (auto q = value_div(a, b)) {
        r[k] = *q;
      } else {
        return std::nullopt;  // not exact for every value of the symbols
      }
    }
  } catch (const Error& e) {
    fail("{}: {}", label, e.what());
  }
  return std::vector<Tensor>{std::move(out)};
}

}  // namespace kiln
