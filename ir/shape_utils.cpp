#include "ir/shape_utils.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/symbolic_dim.h"

namespace kiln {

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da == db || db == 1) r[i] = da;
    else if (da == 1) r[i] = db;
    // ONNX would take the other dim when a symbolic one is 1 at run time;
    // kiln does not guess which case holds.
    else if (is_symbolic_dim(da) || is_symbolic_dim(db))
      fail(
          "shapes [{}] and [{}] cannot be broadcast: dim {} is {} against {} (with a symbolic dim kiln needs equal "
          "dims or a 1)",
          dims_str(a), dims_str(b), i, dim_str(da), dim_str(db));
    else fail("shapes [{}] and [{}] cannot be broadcast", fmt::join(a, ","), fmt::join(b, ","));
  }
  return r;
}

Shape broadcast_all(const std::vector<Shape>& shapes) {
  Shape r;
  for (const Shape& s : shapes) r = broadcast_shapes(r, s);
  return r;
}

int normalize_axis(int64_t axis, int rank, std::string_view what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max(rank, 1)) fail("{} {} is out of range for rank {}", what, axis, rank);
  return static_cast<int>(a);
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  std::vector<int64_t> ist = strides_of(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : ist[i];
  return st;
}

std::vector<int64_t> channels_last_perm(int rank) {
  KILN_CHECK(rank >= 2, "channels_last_perm needs rank >= 2, got {}", rank);
  std::vector<int64_t> p = {0};
  for (int i = 2; i < rank; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}

std::vector<int64_t> channels_first_perm(int rank) {
  KILN_CHECK(rank >= 2, "channels_first_perm needs rank >= 2, got {}", rank);
  std::vector<int64_t> p = {0, rank - 1};
  for (int i = 1; i < rank - 1; ++i) p.push_back(i);
  return p;
}

Shape permute_dims(const Shape& s, const std::vector<int64_t>& perm) {
  KILN_CHECK(perm.size() == s.size(), "permutation of {} entries for rank {}", perm.size(), s.size());
  Shape r(s.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    KILN_CHECK(perm[i] >= 0 && perm[i] < int64_t(s.size()), "bad permutation entry {}", perm[i]);
    r[i] = s[perm[i]];
  }
  return r;
}

}  // namespace kiln
