// Shape and data-movement ops: inference errors, kernel numerics on edge
// cases the ONNX node tests miss, and the ONNX adapters' opset forms.
// Expected values are hand-computed or from numpy (noted where so).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <climits>
#include <cstring>
#include <numeric>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ops/registry.h"
#include "ops/shape_ops.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------------------
// Helpers: infer / evaluate one kiln op on given operand types / tensors.

std::vector<TensorType> infer(const std::string& op, const std::vector<TensorType>& ins, const AttrMap& a, int nout = 1,
                              const std::vector<Tensor>& known = {}) {
  Graph g;
  std::vector<Value*> vs;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (i < known.size() && known[i].has_data() && known[i].numel() > 0)
      vs.push_back(g.add_constant(fmt::format("c{}", i), known[i]));
    else vs.push_back(g.add_input(fmt::format("x{}", i), ins[i]));
  }
  InferContext ic(op, vs, a, nout, "test");
  return infer_types(op_registry().get(op), ic);
}

std::vector<Tensor> run_n(const std::string& op, const std::vector<Tensor>& ins, const AttrMap& a, int nout) {
  std::vector<TensorType> types;
  for (const Tensor& t : ins) types.push_back(t.type());
  std::vector<TensorType> out = infer(op, types, a, nout, ins);
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ins) ptrs.push_back(&t);
  return evaluate_op(op_registry().get(op), a, ptrs, out, "test");
}

Tensor run(const std::string& op, const std::vector<Tensor>& ins, const AttrMap& a) { return run_n(op, ins, a, 1)[0]; }

Tensor iota(DType dt, Shape s) {
  Tensor t(dt, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, static_cast<double>(i));
  return t;
}

Tensor ints(DType dt, Shape s, std::vector<double> v) { return Tensor::from(dt, std::move(s), v); }

std::vector<double> values(const Tensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_double(i));
  return r;
}

AttrMap attrs(std::initializer_list<std::pair<const char*, Attribute>> kv) {
  AttrMap m;
  for (auto& [k, v] : kv) m.set(k, v);
  return m;
}

using I = std::vector<int64_t>;

#define EXPECT_ERROR_HAS(stmt, text)                                              \
  do {                                                                            \
    try {                                                                         \
      stmt;                                                                       \
      ADD_FAILURE() << "expected an error containing \"" << text << "\"";         \
    } catch (const Error& e) {                                                    \
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what(); \
    }                                                                             \
  } while (0)

// ---------------------------------------------------------------------------
// reshape

TEST(ShapeOps, ReshapeRejectsElementCountMismatch) {
  EXPECT_ERROR_HAS(infer("reshape", {TensorType(DType::F32, {2, 3})}, attrs({{"shape", I{4, 2}}})), "6 elements");
}

TEST(ShapeOps, ReshapeRejectsUnresolvedDims) {
  EXPECT_ERROR_HAS(infer("reshape", {TensorType(DType::F32, {2, 3})}, attrs({{"shape", I{-1, 3}}})), "negative dim");
}

TEST(ShapeOps, ReshapeKeepsBytesOfEveryDtype) {
  Tensor x = iota(DType::F16, {2, 3});
  Tensor y = run("reshape", {x}, attrs({{"shape", I{3, 1, 2}}}));
  EXPECT_EQ(y.shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(values(y), values(x));
}

// ---------------------------------------------------------------------------
// transpose

TEST(ShapeOps, TransposeRejectsBadPerms) {
  TensorType t(DType::F32, {2, 3, 4});
  EXPECT_ERROR_HAS(infer("transpose", {t}, attrs({{"perm", I{0, 0, 1}}})), "not a permutation");
  EXPECT_ERROR_HAS(infer("transpose", {t}, attrs({{"perm", I{0, 1, 3}}})), "not a permutation");
  EXPECT_ERROR_HAS(infer("transpose", {t}, attrs({{"perm", I{1, 0}}})), "2 entries for rank 3");
  EXPECT_ERROR_HAS(infer("transpose", {t}, attrs({{"perm", I{-1, 0, 1}}})), "not a permutation");
}

TEST(ShapeOps, Transpose3dMatchesNumpy) {
  // numpy: np.arange(24).reshape(2,3,4).transpose(2,0,1).flatten()
  std::vector<double> want = {0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23};
  for (DType dt : {DType::F32, DType::I64, DType::U8, DType::BF16}) {
    Tensor y = run("transpose", {iota(dt, {2, 3, 4})}, attrs({{"perm", I{2, 0, 1}}}));
    EXPECT_EQ(y.shape(), (Shape{4, 2, 3}));
    EXPECT_EQ(values(y), want) << dtype_name(dt);
  }
}

TEST(ShapeOps, TransposeOfBoolMovesBytes) {
  Tensor x = ints(DType::Bool, {2, 2}, {1, 0, 0, 1});
  x.set_int(1, 1);  // [[1,1],[0,1]]
  Tensor y = run("transpose", {x}, attrs({{"perm", I{1, 0}}}));
  EXPECT_EQ(values(y), (std::vector<double>{1, 0, 1, 1}));
}

// Checks transpose against an index-by-index loop (the input holds its own flat indices).
void check_transpose(DType dt, const Shape& s, const I& perm) {
  Tensor x = iota(dt, s);
  Tensor y = run("transpose", {x}, attrs({{"perm", perm}}));
  std::vector<int64_t> ist = strides_of(s), ost = strides_of(y.shape());
  for (int64_t o = 0; o < y.numel(); ++o) {
    int64_t rem = o, src = 0;
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t i = rem / ost[d];
      rem %= ost[d];
      src += i * ist[perm[d]];
    }
    ASSERT_EQ(y.get_double(o), x.get_double(src)) << "at " << o;
  }
}

TEST(ShapeOps, TransposeMatchesNaiveLoop) {
  check_transpose(DType::F32, {3, 5, 7, 11, 2}, {4, 1, 3, 0, 2});
  // Tiled paths (both dims >= 8, partial 32-blocks), every element size.
  check_transpose(DType::F32, {2, 40, 50}, {0, 2, 1});
  check_transpose(DType::F16, {70, 33}, {1, 0});
  check_transpose(DType::U8, {3, 9, 4, 65}, {3, 0, 2, 1});
  check_transpose(DType::F64, {9, 2, 37}, {2, 1, 0});
}

// ---------------------------------------------------------------------------
// concat / split

TEST(ShapeOps, ConcatRejectsDtypeMismatch) {
  EXPECT_ERROR_HAS(
      infer("concat", {TensorType(DType::F32, {2}), TensorType(DType::F16, {3})}, attrs({{"axis", int64_t(0)}})),
      "operand 1 is f16");
}

TEST(ShapeOps, ConcatRejectsShapeMismatchOffAxis) {
  EXPECT_ERROR_HAS(
      infer("concat", {TensorType(DType::F32, {2, 3}), TensorType(DType::F32, {2, 4})}, attrs({{"axis", int64_t(0)}})),
      "dim 1 differs");
  EXPECT_ERROR_HAS(infer("concat", {TensorType(DType::F32, {2, 3}), TensorType(DType::F32, {2, 3, 1})},
                         attrs({{"axis", int64_t(0)}})),
                   "ranks differ");
  EXPECT_ERROR_HAS(infer("concat", {TensorType(DType::F32, {2, 3})}, attrs({{"axis", int64_t(2)}})), "out of range");
  EXPECT_ERROR_HAS(infer("concat", {TensorType(DType::F32, {})}, attrs({{"axis", int64_t(0)}})), "scalars");
}

TEST(ShapeOps, ConcatWithEmptyOperandAndNegativeAxis) {
  Tensor a = iota(DType::I32, {2, 2}), b(DType::I32, {2, 0}), c = ints(DType::I32, {2, 1}, {7, 8});
  Tensor y = run("concat", {a, b, c}, attrs({{"axis", int64_t(-1)}}));
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(y), (std::vector<double>{0, 1, 7, 2, 3, 8}));
}

TEST(ShapeOps, SplitChecksSizes) {
  TensorType t(DType::F32, {5, 2});
  EXPECT_ERROR_HAS(infer("split", {t}, attrs({{"axis", int64_t(0)}, {"split", I{2, 2}}}), 2), "sums to 4");
  EXPECT_ERROR_HAS(infer("split", {t}, attrs({{"axis", int64_t(0)}, {"split", I{2, 3}}}), 3), "3 results");
  EXPECT_ERROR_HAS(infer("split", {t}, attrs({{"axis", int64_t(0)}, {"split", I{6, -1}}}), 2), "negative");
}

TEST(ShapeOps, SplitAlongInnerAxisWithZeroPart) {
  std::vector<Tensor> r =
      run_n("split", {iota(DType::F64, {2, 3})}, attrs({{"axis", int64_t(1)}, {"split", I{2, 0, 1}}}), 3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(values(r[0]), (std::vector<double>{0, 1, 3, 4}));
  EXPECT_EQ(r[1].shape(), (Shape{2, 0}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{2, 5}));
}

// ---------------------------------------------------------------------------
// slice

TEST(ShapeOps, CanonicalSliceClampsLikeOnnx) {
  // dim 10: start -3 -> 7, end INT64_MAX -> 10.
  ops::SliceSpec s = ops::canonical_slice({10}, {-3}, {INT64_MAX}, {}, {});
  EXPECT_EQ(s.starts, I{7});
  EXPECT_EQ(s.ends, I{10});
  EXPECT_EQ(s.steps, I{1});
  // Negative step from the end to before the start: start INT64_MAX -> 9, end INT64_MIN -> -1.
  s = ops::canonical_slice({10}, {INT64_MAX}, {INT64_MIN}, {}, {-3});
  EXPECT_EQ(s.starts, I{9});
  EXPECT_EQ(s.ends, I{-1});
  EXPECT_EQ(ops::slice_extent(9, -1, -3), 4);  // 9, 6, 3, 0
  // Empty ranges become start == end.
  s = ops::canonical_slice({10}, {8}, {2}, {}, {});
  EXPECT_EQ(s.starts, I{8});
  EXPECT_EQ(s.ends, I{8});
  s = ops::canonical_slice({10}, {2}, {8}, {}, {-1});
  EXPECT_EQ(s.ends, I{2});
  // Untouched axes are full; negative axes count from the end; dim 0 with a negative step.
  s = ops::canonical_slice({4, 0, 6}, {1, 0}, {3, 5}, {-1, 1}, {1, -1});
  EXPECT_EQ(s.starts, (I{0, -1, 1}));
  EXPECT_EQ(s.ends, (I{4, -1, 3}));
  EXPECT_EQ(s.steps, (I{1, -1, 1}));
}

TEST(ShapeOps, CanonicalSliceRejectsBadOperands) {
  EXPECT_ERROR_HAS(ops::canonical_slice({4}, {0}, {4}, {}, {0}), "step");
  EXPECT_ERROR_HAS(ops::canonical_slice({4, 4}, {0, 0}, {4, 4}, {1, -1}, {}), "given twice");
  EXPECT_ERROR_HAS(ops::canonical_slice({4}, {0}, {4}, {1}, {}), "out of range");
  EXPECT_ERROR_HAS(ops::canonical_slice({4}, {0, 1}, {4}, {}, {}), "differ in length");
}

TEST(ShapeOps, SliceRejectsNonCanonicalAttributes) {
  TensorType t(DType::F32, {5});
  EXPECT_ERROR_HAS(infer("slice", {t}, attrs({{"starts", I{-1}}, {"ends", I{5}}, {"steps", I{1}}})),
                   "not a canonical slice");
  EXPECT_ERROR_HAS(infer("slice", {t}, attrs({{"starts", I{0}}, {"ends", I{6}}, {"steps", I{1}}})),
                   "not a canonical slice");
  EXPECT_ERROR_HAS(infer("slice", {t}, attrs({{"starts", I{4}}, {"ends", I{-1}}, {"steps", I{0}}})),
                   "not a canonical slice");
  EXPECT_ERROR_HAS(infer("slice", {t}, attrs({{"starts", I{0, 0}}, {"ends", I{5, 5}}, {"steps", I{1, 1}}})),
                   "one value per dim");
}

TEST(ShapeOps, SliceNegativeStepsIn2d) {
  // numpy: np.arange(12).reshape(3,4)[2::-2, 3:0:-2] = [[11, 9], [3, 1]]
  Tensor y =
      run("slice", {iota(DType::I16, {3, 4})}, attrs({{"starts", I{2, 3}}, {"ends", I{-1, 0}}, {"steps", I{-2, -2}}}));
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(y), (std::vector<double>{11, 9, 3, 1}));
}

TEST(ShapeOps, SliceEmptyResult) {
  Tensor y =
      run("slice", {iota(DType::F32, {3, 4})}, attrs({{"starts", I{1, 2}}, {"ends", I{1, 4}}, {"steps", I{1, 1}}}));
  EXPECT_EQ(y.shape(), (Shape{0, 2}));
}

// ---------------------------------------------------------------------------
// pad

TEST(ShapeOps, PadRejectsCropPastTheDim) {
  EXPECT_ERROR_HAS(infer("pad", {TensorType(DType::F32, {3, 2})}, attrs({{"pads", I{0, -2, 0, -1}}})),
                   "remove more than dim 1");
  EXPECT_ERROR_HAS(infer("pad", {TensorType(DType::F32, {3})}, attrs({{"pads", I{1}}})), "needs 2 values");
  EXPECT_ERROR_HAS(
      infer("pad", {TensorType(DType::F32, {3})}, attrs({{"pads", I{1, 1}}, {"mode", std::string("mirror")}})),
      "mode 'mirror'");
  EXPECT_ERROR_HAS(
      infer("pad", {TensorType(DType::F32, {0})}, attrs({{"pads", I{1, 1}}, {"mode", std::string("edge")}})),
      "nothing to copy");
  EXPECT_ERROR_HAS(infer("pad", {TensorType(DType::F32, {2}), TensorType(DType::F64, {})}, attrs({{"pads", I{1, 1}}})),
                   "padding value is f64");
}

TEST(ShapeOps, PadConstantWithNegativePadsCrops) {
  // [[0,1,2],[3,4,5]] with pads begin (1,-1) end (-1,2), value 9:
  // rows: 9-row then row 0 (row 1 cropped); cols: drop col 0, add two 9s.
  Tensor y = run("pad", {iota(DType::I64, {2, 3})}, attrs({{"pads", I{1, -1, -1, 2}}, {"value", 9.0f}}));
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  EXPECT_EQ(values(y), (std::vector<double>{9, 9, 9, 9, 1, 2, 9, 9}));
}

TEST(ShapeOps, PadConstantValueFromOperand) {
  Tensor v = Tensor::scalar(DType::F16, -2.5);
  Tensor y = run("pad", {iota(DType::F16, {2}), v}, attrs({{"pads", I{1, 0}}}));
  EXPECT_EQ(values(y), (std::vector<double>{-2.5, 0, 1}));
}

TEST(ShapeOps, PadReflectEdgeWrapMatchNumpy) {
  Tensor x = iota(DType::F32, {2, 3});
  // np.pad(a, ((1,0),(2,1)), 'reflect')
  Tensor r = run("pad", {x}, attrs({{"pads", I{1, 2, 0, 1}}, {"mode", std::string("reflect")}}));
  EXPECT_EQ(values(r), (std::vector<double>{5, 4, 3, 4, 5, 4, 2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4}));
  // np.pad(a, ((0,1),(1,2)), 'edge')
  Tensor e = run("pad", {x}, attrs({{"pads", I{0, 1, 1, 2}}, {"mode", std::string("edge")}}));
  EXPECT_EQ(values(e), (std::vector<double>{0, 0, 1, 2, 2, 2, 3, 3, 4, 5, 5, 5, 3, 3, 4, 5, 5, 5}));
  // np.pad(a, ((1,1),(4,0)), 'wrap')
  Tensor w = run("pad", {x}, attrs({{"pads", I{1, 4, 1, 0}}, {"mode", std::string("wrap")}}));
  EXPECT_EQ(values(w),
            (std::vector<double>{5, 3, 4, 5, 3, 4, 5, 2, 0, 1, 2, 0, 1, 2, 5, 3, 4, 5, 3, 4, 5, 2, 0, 1, 2, 0, 1, 2}));
  // Reflect wider than the dim: np.pad([1,2,3], (5,4), 'reflect')
  Tensor big =
      run("pad", {ints(DType::I8, {3}, {1, 2, 3})}, attrs({{"pads", I{5, 4}}, {"mode", std::string("reflect")}}));
  EXPECT_EQ(values(big), (std::vector<double>{2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3}));
}

// numpy-style padding by repeated mirroring (independent of the kernel's modular formula).
int64_t naive_source(const std::string& mode, int64_t p, int64_t d) {
  if (p >= 0 && p < d) return p;
  if (mode == "constant") return -1;
  if (mode == "edge") return p < 0 ? 0 : d - 1;
  if (mode == "wrap") {
    while (p < 0) p += d;
    return p % d;
  }
  if (d == 1) return 0;
  while (p < 0 || p >= d) p = p < 0 ? -p : 2 * (d - 1) - p;
  return p;
}

TEST(ShapeOps, PadMatchesNaiveLoopInEveryMode) {
  Shape s{3, 4, 5};
  Tensor x = iota(DType::F32, s);
  std::vector<I> pad_sets = {{0, 0, 0, 0, 0, 0}, {1, 2, 3, 2, 1, 0}, {-1, 0, 2, 1, -2, 7}, {2, -3, -1, -2, 5, -3}};
  for (const char* mode : {"constant", "reflect", "edge", "wrap"})
    for (const I& pads : pad_sets) {
      AttrMap a = attrs({{"pads", pads}, {"mode", std::string(mode)}});
      if (std::string(mode) == "constant") a.set("value", -7.0f);
      Tensor y = run("pad", {x}, a);
      Shape os = y.shape();
      std::vector<int64_t> ost = strides_of(os), ist = strides_of(s);
      for (int64_t o = 0; o < y.numel(); ++o) {
        int64_t rem = o, src = 0;
        bool padded = false;
        for (int d = 0; d < 3; ++d) {
          int64_t i = rem / ost[d];
          rem %= ost[d];
          int64_t p = naive_source(mode, i - pads[d], s[d]);
          padded |= p < 0;
          src += p * ist[d];
        }
        ASSERT_EQ(y.get_double(o), padded ? -7.0 : x.get_double(src))
            << mode << " pads " << ::testing::PrintToString(pads) << " at " << o;
      }
    }
}

TEST(ShapeOps, PadReflectWithCropOnOtherSide) {
  // Position map: result k reads reflect(k - begin). begin -1, end +2 on [0,1,2,3]:
  // positions 1,2,3,4,5 -> 1,2,3,2,1.
  Tensor y = run("pad", {iota(DType::F32, {4})}, attrs({{"pads", I{-1, 2}}, {"mode", std::string("reflect")}}));
  EXPECT_EQ(values(y), (std::vector<double>{1, 2, 3, 2, 1}));
}

// ---------------------------------------------------------------------------
// expand / tile

TEST(ShapeOps, ExpandRejectsNonBroadcastable) {
  EXPECT_ERROR_HAS(infer("expand", {TensorType(DType::F32, {3})}, attrs({{"shape", I{2, 4}}})), "cannot be broadcast");
  EXPECT_ERROR_HAS(infer("expand", {TensorType(DType::F32, {3})}, attrs({{"shape", I{2, 1}}})), "does not broadcast");
  EXPECT_ERROR_HAS(infer("expand", {TensorType(DType::F32, {1, 3})}, attrs({{"shape", I{3}}})), "lower rank");
}

TEST(ShapeOps, ExpandBroadcastsMiddleDim) {
  Tensor y = run("expand", {ints(DType::U16, {2, 1, 2}, {1, 2, 3, 4})}, attrs({{"shape", I{2, 3, 2}}}));
  EXPECT_EQ(values(y), (std::vector<double>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
}

TEST(ShapeOps, TileRepeatsEachDim) {
  // np.tile([[1,2],[3,4]], (2,3))
  Tensor y = run("tile", {ints(DType::F32, {2, 2}, {1, 2, 3, 4})}, attrs({{"repeats", I{2, 3}}}));
  EXPECT_EQ(y.shape(), (Shape{4, 6}));
  EXPECT_EQ(values(y), (std::vector<double>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  EXPECT_ERROR_HAS(infer("tile", {TensorType(DType::F32, {2})}, attrs({{"repeats", I{2, 2}}})), "2 entries for rank 1");
  EXPECT_ERROR_HAS(infer("tile", {TensorType(DType::F32, {2})}, attrs({{"repeats", I{-1}}})), "negative");
}

// ---------------------------------------------------------------------------
// depth_to_space / space_to_depth

TEST(ShapeOps, DepthToSpaceModesMatchNumpy) {
  Tensor x = iota(DType::F32, {1, 8, 1, 2});
  Tensor dcr = run("depth_to_space", {x}, attrs({{"blocksize", int64_t(2)}, {"mode", std::string("DCR")}}));
  EXPECT_EQ(dcr.shape(), (Shape{1, 2, 2, 4}));
  EXPECT_EQ(values(dcr), (std::vector<double>{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}));
  Tensor crd = run("depth_to_space", {x}, attrs({{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}}));
  EXPECT_EQ(values(crd), (std::vector<double>{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15}));
  EXPECT_ERROR_HAS(infer("depth_to_space", {TensorType(DType::F32, {1, 6, 1, 1})}, attrs({{"blocksize", int64_t(2)}})),
                   "not divisible");
}

TEST(ShapeOps, SpaceToDepthMatchesNumpyAndInvertsDcr) {
  Tensor x = iota(DType::I32, {1, 1, 4, 4});
  Tensor y = run("space_to_depth", {x}, attrs({{"blocksize", int64_t(2)}}));
  EXPECT_EQ(y.shape(), (Shape{1, 4, 2, 2}));
  EXPECT_EQ(values(y), (std::vector<double>{0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15}));
  Tensor back = run("depth_to_space", {y}, attrs({{"blocksize", int64_t(2)}}));
  EXPECT_TRUE(back.reshaped(x.shape()) == x);
  EXPECT_ERROR_HAS(infer("space_to_depth", {TensorType(DType::F32, {1, 1, 3, 4})}, attrs({{"blocksize", int64_t(2)}})),
                   "not divisible");
}

// ---------------------------------------------------------------------------
// range

TEST(ShapeOps, RangeNeedsKnownScalars) {
  TensorType s(DType::I32, {});
  EXPECT_ERROR_HAS(infer("range", {s, s, s}, {}), "must be known at compile time");
}

TEST(ShapeOps, RangeCountsLikeOnnx) {
  auto sc = [](DType dt, double v) { return Tensor::scalar(dt, v); };
  Tensor y = run("range", {sc(DType::I32, 10), sc(DType::I32, 6), sc(DType::I32, -3)}, {});
  EXPECT_EQ(values(y), (std::vector<double>{10, 7}));
  Tensor f = run("range", {sc(DType::F32, 1), sc(DType::F32, 2), sc(DType::F32, 0.25)}, {});
  EXPECT_EQ(values(f), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  Tensor e = run("range", {sc(DType::I64, 5), sc(DType::I64, 1), sc(DType::I64, 2)}, {});
  EXPECT_EQ(e.shape(), (Shape{0}));
  EXPECT_ERROR_HAS(run("range", {sc(DType::I64, 0), sc(DType::I64, 3), sc(DType::I64, 0)}, {}), "delta is zero");
}

// ---------------------------------------------------------------------------
// ONNX adapters: one-node models through the importer and the reference backend.

struct OnnxNode {
  using Inputs = std::vector<std::pair<std::string, Tensor>>;
  OnnxNode(std::string op_, int opset_, Inputs inputs_, std::vector<std::string> frozen_ = {}, int outputs_ = 1,
           std::function<void(onnx::NodeProto&)> set_attrs_ = {})
      : op(std::move(op_)),
        opset(opset_),
        inputs(std::move(inputs_)),
        frozen(std::move(frozen_)),
        outputs(outputs_),
        set_attrs(std::move(set_attrs_)) {}
  std::string op;
  int opset;
  Inputs inputs;                    // name, value ("" name = absent)
  std::vector<std::string> frozen;  // inputs given as initializers
  int outputs;
  std::function<void(onnx::NodeProto&)> set_attrs;
};

std::vector<Tensor> run_onnx(const OnnxNode& n) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(n.opset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("t");
  onnx::NodeProto* node = g->add_node();
  node->set_op_type(n.op);
  node->set_name("n");
  std::map<std::string, Tensor> feed;
  for (auto& [name, t] : n.inputs) {
    node->add_input(name);
    if (name.empty()) continue;
    bool is_init = std::find(n.frozen.begin(), n.frozen.end(), name) != n.frozen.end();
    if (is_init) {
      *g->add_initializer() = tensor_to_proto(t, name);
      continue;
    }
    onnx::ValueInfoProto* vi = g->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype_to_onnx(t.dtype()));
    auto* sh = tt->mutable_shape();
    for (int64_t d : t.shape()) sh->add_dim()->set_dim_value(d);
    feed[name] = t;
  }
  for (int i = 0; i < n.outputs; ++i) {
    node->add_output(fmt::format("y{}", i));
    g->add_output()->set_name(fmt::format("y{}", i));
  }
  if (n.set_attrs) n.set_attrs(*node);
  std::string bytes;
  m.SerializeToString(&bytes);
  ImportOptions opts;
  opts.known_inputs = feed;
  ImportResult r = import_onnx_bytes(bytes, "", "t.onnx", opts);
  std::map<std::string, Tensor> runtime_feed;
  for (Value* in : r.graph->inputs()) runtime_feed[in->name()] = feed.at(in->name());
  return ReferenceExecutor(*r.graph).run(runtime_feed);
}

onnx::AttributeProto* add_attr(onnx::NodeProto& n, const std::string& name, onnx::AttributeProto::AttributeType t) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}
void attr_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  add_attr(n, name, onnx::AttributeProto::INT)->set_i(v);
}
void attr_ints(onnx::NodeProto& n, const std::string& name, const I& v) {
  auto* a = add_attr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
Tensor i64(I v) { return Tensor::from(DType::I64, {static_cast<int64_t>(v.size())}, v); }

TEST(ShapeAdapters, ReshapeZeroCopiesAndMinusOneInfers) {
  auto y = run_onnx({"Reshape", 14, {{"x", iota(DType::F32, {2, 3, 4})}, {"s", i64({0, -1})}}});
  EXPECT_EQ(y[0].shape(), (Shape{2, 12}));
  // allowzero=1 keeps a literal 0 (empty input).
  auto z =
      run_onnx({"Reshape", 14, {{"x", Tensor(DType::F32, {0, 3})}, {"s", i64({3, 0})}}, {}, 1, [](onnx::NodeProto& n) {
                  attr_int(n, "allowzero", 1);
                }});
  EXPECT_EQ(z[0].shape(), (Shape{3, 0}));
  EXPECT_ERROR_HAS(run_onnx({"Reshape", 14, {{"x", iota(DType::F32, {2, 3})}, {"s", i64({4, -1})}}}), "cannot reshape");
  EXPECT_ERROR_HAS(run_onnx({"Reshape", 14, {{"x", iota(DType::F32, {2, 3})}, {"s", i64({-1, -1})}}}),
                   "more than one -1");
  // Opset 1-4: the shape is an attribute.
  auto old = run_onnx({"Reshape", 4, {{"x", iota(DType::F32, {2, 3})}}, {}, 1, [](onnx::NodeProto& n) {
                         attr_ints(n, "shape", {3, -1});
                       }});
  EXPECT_EQ(old[0].shape(), (Shape{3, 2}));
}

TEST(ShapeAdapters, SqueezeChecksAxesAndDefaultsToAllOnes) {
  auto y = run_onnx({"Squeeze", 13, {{"x", iota(DType::F32, {1, 3, 1})}}});
  EXPECT_EQ(y[0].shape(), (Shape{3}));
  EXPECT_ERROR_HAS(run_onnx({"Squeeze", 13, {{"x", iota(DType::F32, {1, 3, 1})}, {"a", i64({1})}}}), "not 1");
  auto old = run_onnx({"Squeeze", 11, {{"x", iota(DType::F32, {1, 3, 1})}}, {}, 1, [](onnx::NodeProto& n) {
                         attr_ints(n, "axes", {-1});
                       }});
  EXPECT_EQ(old[0].shape(), (Shape{1, 3}));
  auto u = run_onnx({"Unsqueeze", 13, {{"x", iota(DType::F32, {3, 4})}, {"a", i64({-1, 0})}}});
  EXPECT_EQ(u[0].shape(), (Shape{1, 3, 4, 1}));
  EXPECT_ERROR_HAS(run_onnx({"Unsqueeze", 13, {{"x", iota(DType::F32, {3})}, {"a", i64({0, -3})}}}), "repeated");
}

TEST(ShapeAdapters, SliceOpset1AttributesAndIntMaxEnds) {
  auto y = run_onnx({"Slice", 1, {{"x", iota(DType::F32, {3, 4})}}, {}, 1, [](onnx::NodeProto& n) {
                       attr_ints(n, "starts", {1});
                       attr_ints(n, "ends", {INT64_MAX});
                       attr_ints(n, "axes", {1});
                     }});
  EXPECT_EQ(values(y[0]), (std::vector<double>{1, 2, 3, 5, 6, 7, 9, 10, 11}));
  // Opset 10+: reversal with INT_MIN end (numpy x[::-1]).
  auto r = run_onnx(
      {"Slice",
       13,
       {{"x", iota(DType::I32, {4})}, {"s", i64({-1})}, {"e", i64({INT64_MIN})}, {"a", i64({0})}, {"p", i64({-1})}}});
  EXPECT_EQ(values(r[0]), (std::vector<double>{3, 2, 1, 0}));
}

TEST(ShapeAdapters, PadKeepsLargeIntegerValueExact) {
  // 2^53 + 1 does not fit an f32 attribute: it must stay an operand.
  Tensor v(DType::I64, {});
  v.set_int(0, (int64_t(1) << 53) + 1);
  auto y = run_onnx({"Pad", 13, {{"x", ints(DType::I64, {1}, {5})}, {"p", i64({1, 0})}, {"v", v}}, {"v"}});
  EXPECT_EQ(y[0].get_int(0), (int64_t(1) << 53) + 1);
  EXPECT_EQ(y[0].get_int(1), 5);
  // A runtime constant_value stays an operand.
  auto rt = run_onnx(
      {"Pad", 13, {{"x", ints(DType::F32, {1}, {5})}, {"p", i64({0, 2})}, {"v", Tensor::scalar(DType::F32, -1)}}});
  EXPECT_EQ(values(rt[0]), (std::vector<double>{5, -1, -1}));
  // Opset 2: pads and value attributes.
  auto old = run_onnx({"Pad", 2, {{"x", iota(DType::F32, {2})}}, {}, 1, [](onnx::NodeProto& n) {
                         attr_ints(n, "pads", {0, 2});
                         add_attr(n, "value", onnx::AttributeProto::FLOAT)->set_f(1.5f);
                       }});
  EXPECT_EQ(values(old[0]), (std::vector<double>{0, 1, 1.5, 1.5}));
  // Opset 18 axes: pad only the last dim.
  auto ax =
      run_onnx({"Pad", 18, {{"x", iota(DType::F32, {2, 2})}, {"p", i64({1, 0})}, {"", Tensor()}, {"a", i64({-1})}}});
  EXPECT_EQ(values(ax[0]), (std::vector<double>{0, 0, 1, 0, 2, 3}));
}

TEST(ShapeAdapters, SplitForms) {
  // Opset 18 num_outputs with an uneven last chunk: 7 -> 3, 3, 1.
  auto y = run_onnx(
      {"Split", 18, {{"x", iota(DType::F32, {7})}}, {}, 3, [](onnx::NodeProto& n) { attr_int(n, "num_outputs", 3); }});
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(values(y[2]), (std::vector<double>{6}));
  // Opset 13 without sizes: equal parts must divide.
  EXPECT_ERROR_HAS(run_onnx({"Split", 13, {{"x", iota(DType::F32, {7})}}, {}, 2}), "equal parts");
  // Opset 2 sizes attribute.
  auto old = run_onnx({"Split", 2, {{"x", iota(DType::F32, {2, 3})}}, {}, 2, [](onnx::NodeProto& n) {
                         attr_int(n, "axis", -1);
                         attr_ints(n, "split", {1, 2});
                       }});
  EXPECT_EQ(values(old[1]), (std::vector<double>{1, 2, 4, 5}));
}

TEST(ShapeAdapters, ConstantsFromShapeSizeConstantOfShape) {
  auto s = run_onnx({"Shape", 15, {{"x", iota(DType::F32, {2, 3, 4})}}, {}, 1, [](onnx::NodeProto& n) {
                       attr_int(n, "start", -2);
                       attr_int(n, "end", 100);
                     }});
  EXPECT_EQ(s[0].to_int_vector(), (I{3, 4}));
  auto z = run_onnx({"Size", 13, {{"x", iota(DType::F32, {2, 3, 4})}}});
  EXPECT_EQ(z[0].shape(), Shape{});
  EXPECT_EQ(z[0].get_int(0), 24);
  auto c = run_onnx({"ConstantOfShape", 9, {{"s", i64({2, 2})}}, {}, 1, [](onnx::NodeProto& n) {
                       auto* a = add_attr(n, "value", onnx::AttributeProto::TENSOR);
                       *a->mutable_t() = tensor_to_proto(Tensor::from(DType::I32, {1}, std::vector<int>{7}), "v");
                     }});
  EXPECT_EQ(c[0].dtype(), DType::I32);
  EXPECT_EQ(values(c[0]), (std::vector<double>{7, 7, 7, 7}));
}

TEST(ShapeAdapters, ConstantNodeForms) {
  auto y = run_onnx({"Constant", 13, {}, {}, 1, [](onnx::NodeProto& n) { attr_ints(n, "value_ints", {4, 5}); }});
  EXPECT_EQ(y[0].dtype(), DType::I64);
  EXPECT_EQ(y[0].to_int_vector(), (I{4, 5}));
  auto f = run_onnx({"Constant", 13, {}, {}, 1, [](onnx::NodeProto& n) {
                       add_attr(n, "value_float", onnx::AttributeProto::FLOAT)->set_f(2.5f);
                     }});
  EXPECT_EQ(f[0].shape(), Shape{});
  EXPECT_EQ(f[0].get_double(0), 2.5);
  try {
    run_onnx({"Constant", 13, {}, {}, 1, [](onnx::NodeProto& n) {
                add_attr(n, "value_string", onnx::AttributeProto::STRING)->set_s("hi");
              }});
    ADD_FAILURE() << "string constant accepted";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("string"), std::string::npos) << e.what();
  }
}

TEST(ShapeAdapters, TileOpset1AndExpandBidirectional) {
  auto t = run_onnx(
      {"Tile",
       1,
       {{"x", iota(DType::F32, {2, 1})}, {"t", Tensor::scalar(DType::I64, 3)}, {"a", Tensor::scalar(DType::I64, 1)}}});
  EXPECT_EQ(t[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values(t[0]), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  // Expand's shape may be smaller than the input's dims (bidirectional broadcast).
  auto e = run_onnx({"Expand", 13, {{"x", iota(DType::F32, {3, 1})}, {"s", i64({1, 2})}}});
  EXPECT_EQ(e[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(values(e[0]), (std::vector<double>{0, 0, 1, 1, 2, 2}));
}

}  // namespace
}  // namespace kiln
