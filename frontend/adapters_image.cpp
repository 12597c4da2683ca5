// ONNX adapters for image-geometry ops written as kiln ops (see
// import_context.h), following the ONNX reference (onnx/reference/ops):
//   CenterCropPad-18: a centred slice where the target is smaller, a centred
//     zero pad where it is larger (the odd pixel goes after);
//   AffineGrid-20: theta [N, 2, 3] (or [N, 3, 4]) times the homogeneous
//     normalised coordinates of every output position, a compile-time
//     constant [3, H*W] (or [4, D*H*W]), then laid out as [N, H, W, 2].
#include <cmath>

#include "frontend/import_context.h"
#include "ops/shape_ops.h"

namespace kiln::adapters {

namespace {

std::vector<int64_t> int_values(ImportContext& c, int i, const char* what) {
  const Tensor& t = c.require_value(i, what);
  if (!is_int(t.dtype()) || t.type().rank() != 1)
    c.fail("{} must be a 1-D integer tensor, got {}", what, t.type().str());
  std::vector<int64_t> r;
  for (int64_t k = 0; k < t.numel(); ++k) r.push_back(static_cast<int64_t>(t.get_double(k)));
  return r;
}

void center_crop_pad(ImportContext& c) {
  c.only_attrs({"axes"});
  Value* x = c.input(0);
  const Shape& s = x->shape();
  int r = x->type().rank();
  std::vector<int64_t> target = int_values(c, 1, "CenterCropPad shape");
  std::vector<int64_t> axes;
  if (c.attrs().has("axes")) {
    axes = c.attrs().get_ints("axes");
  } else {
    for (int i = 0; i < r; ++i) axes.push_back(i);
  }
  if (axes.size() != target.size())
    c.fail("shape has {} values but {} axes are cropped or padded", target.size(), axes.size());
  std::vector<int64_t> starts(r, 0), ends(s.begin(), s.end()), pads(2 * r, 0);
  bool crop = false, pad = false;
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
    if (a < 0 || a >= r) c.fail("axis {} is out of range for rank {}", axes[k], r);
    int64_t dim = s[a], want = target[k];
    if (want < 0) c.fail("shape value {} is negative", want);
    if (want < dim) {
      starts[a] = (dim - want) / 2;
      ends[a] = starts[a] + want;
      crop = true;
    } else if (want > dim) {
      pads[a] = (want - dim) / 2;
      pads[a + r] = want - dim - pads[a];
      pad = true;
    }
  }
  if (crop) {
    std::vector<int64_t> all_axes, steps(r, 1);
    for (int i = 0; i < r; ++i) all_axes.push_back(i);
    ops::SliceSpec spec = ops::canonical_slice(s, starts, ends, all_axes, steps);
    AttrMap m;
    m.set("starts", spec.starts);
    m.set("ends", spec.ends);
    m.set("steps", spec.steps);
    x = c.emit1("slice", {x}, m);
  }
  if (pad) {
    AttrMap m;
    m.set("pads", pads);
    x = c.emit1("pad", {x}, m);
  }
  if (!crop && !pad) x = c.emit1("identity", {x});
  c.set_outputs({x});
}

void affine_grid(ImportContext& c) {
  c.only_attrs({"align_corners"});
  Value* theta = c.input(0);
  if (!is_float(theta->dtype())) c.fail("theta is {}, not a floating type", theta->type().str());
  std::vector<int64_t> size = int_values(c, 1, "AffineGrid size");
  if (size.size() != 4 && size.size() != 5) c.fail("size has {} values; [N, C, H, W] or [N, C, D, H, W]", size.size());
  const int dims = static_cast<int>(size.size()) - 2;
  const int64_t n = size[0];
  if (theta->shape() != Shape{n, dims, dims + 1})
    c.fail("theta {} should be [{}, {}, {}] for size [{}]", theta->type().str(), n, dims, dims + 1,
           fmt::join(size, ","));
  bool align = c.attrs().get_int("align_corners", 0) != 0;
  // Normalised coordinate of index i along a dim of length len.
  auto coord = [&](int64_t i, int64_t len) {
    if (align) return len > 1 ? -1.0 + 2.0 * double(i) / double(len - 1) : -1.0;
    return -1.0 + (2.0 * double(i) + 1.0) / double(len);
  };
  std::vector<int64_t> spatial(size.begin() + 2, size.end());  // [D,] H, W
  int64_t points = 1;
  for (int64_t d : spatial) {
    if (d <= 0) c.fail("size [{}] has a non-positive spatial dim", fmt::join(size, ","));
    points *= d;
  }
  // Rows x, y[, z], 1 over every position in row-major order of (D,) H, W.
  Tensor base(theta->dtype(), {dims + 1, points});
  for (int64_t p = 0; p < points; ++p) {
    int64_t rest = p;
    std::vector<int64_t> idx(dims);
    for (int d = dims - 1; d >= 0; --d) {
      idx[d] = rest % spatial[d];
      rest /= spatial[d];
    }
    for (int d = 0; d < dims; ++d)  // row 0 is x (the last dim), row 1 y, ...
      base.set_double(d * points + p, coord(idx[dims - 1 - d], spatial[dims - 1 - d]));
    base.set_double(dims * points + p, 1.0);
  }
  Value* grid = c.emit1("matmul", {theta, c.constant(std::move(base), "affine_grid_base")});  // [N, dims, P]
  AttrMap tr;
  tr.set("perm", std::vector<int64_t>{0, 2, 1});
  grid = c.emit1("transpose", {grid}, tr);
  std::vector<int64_t> out = {n};
  out.insert(out.end(), spatial.begin(), spatial.end());
  out.push_back(dims);
  AttrMap rs;
  rs.set("shape", out);
  c.set_outputs({c.emit1("reshape", {grid}, rs)});
}

}  // namespace

void register_image(AdapterTable& t) {
  t.add("CenterCropPad", since_opset(18, center_crop_pad));
  t.add("AffineGrid", since_opset(20, affine_grid));
}

}  // namespace kiln::adapters
