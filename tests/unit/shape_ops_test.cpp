// Shape and data-movement ops: inference errors and kernel numerics on edge
// cases the ONNX node tests miss (the ONNX adapters' opset forms are in
// shape_ops_onnx_test.cpp). Expected values are hand-computed or from numpy
// (noted where so).
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <numeric>

#include "backends/reference/executor.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"
#include "ops/shape_ops.h"
#include "shape_ops_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing::shape_ops;

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

TEST(ShapeOps, CanonicalSliceOnSymbolicDims) {
  const int64_t n = symbol_dim("n");
  // 0:INT64_MAX:1 (an exporter's x[:, None] or x[0:]) takes a symbolic dim whole.
  ops::SliceSpec s = ops::canonical_slice({n, 6}, {0, 1}, {INT64_MAX, 4}, {}, {});
  EXPECT_EQ(s.starts, (I{0, 1}));
  EXPECT_EQ(s.ends, (I{n, 4}));
  EXPECT_EQ(s.data_dependent_axis, -1);
  // Clamping one (x[:5]) has no polynomial size: Unsupported unless the caller
  // takes the data-dependent form, which keeps ONNX's values on that axis.
  EXPECT_THROW(ops::canonical_slice({n, 6}, {0}, {5}, {}, {}), Unsupported);
  s = ops::canonical_slice({n, 6}, {0, -2}, {5, INT64_MAX}, {}, {}, /*allow_data_dependent=*/true);
  EXPECT_EQ(s.data_dependent_axis, 0);
  EXPECT_EQ(s.starts, (I{0, 4}));
  EXPECT_EQ(s.ends, (I{5, 6}));
  EXPECT_EQ(ops::data_dependent_slice_axis({n, 6}, s.starts, s.ends, s.steps), 0);
  // A second clamped symbolic dim is still refused.
  EXPECT_THROW(ops::canonical_slice({n, n}, {0, 1}, {5, 3}, {}, {}, true), Unsupported);
  // An end equal to the dim itself (torch's split: Slice 0:0+n) is whole too;
  // any other symbolic start or end is refused.
  s = ops::canonical_slice({n, 6}, {0}, {n}, {}, {});
  EXPECT_EQ(s.ends, (I{n, 6}));
  EXPECT_EQ(s.data_dependent_axis, -1);
  EXPECT_THROW(ops::canonical_slice({n, 6}, {0}, {n}, {1}, {}, true), Unsupported);
  EXPECT_THROW(ops::canonical_slice({n}, {n}, {INT64_MAX}, {}, {}, true), Unsupported);
}

TEST(ShapeOps, CanonicalSliceCutsStaticDimAtSymbolicEnd) {
  // BERT's position_ids[:, :seq] of a [1, 128] buffer (HF encoders, both
  // exporters): with seq in [1, 32] the end stays inside the dim at every
  // value, so the result is [1, seq] (and [1, seq - 2] from start 2).
  const int64_t seq = symbol_dim("seq");
  const std::vector<SymbolDecl> ranges = {{"seq", 1, 32}};
  ops::SliceSpec s = ops::canonical_slice({1, 128}, {0}, {seq}, {1}, {}, true, &ranges);
  EXPECT_EQ(s.starts, (I{0, 0}));
  EXPECT_EQ(s.ends, (I{1, seq}));
  EXPECT_EQ(s.data_dependent_axis, -1);
  TensorType t(DType::I64, {1, 128});
  AttrMap a = attrs({{"starts", s.starts}, {"ends", s.ends}, {"steps", s.steps}});
  EXPECT_EQ(infer("slice", {t}, a)[0].shape, (Shape{1, seq}));
  s = ops::canonical_slice({1, 128}, {2}, {dim_add(seq, 2)}, {1}, {}, true, &ranges);
  EXPECT_EQ(infer("slice", {t}, attrs({{"starts", s.starts}, {"ends", s.ends}, {"steps", s.steps}}))[0].shape,
            (Shape{1, seq}));
  // The same slice of the buffer computed at seq = 5 reads its first 5 values.
  Tensor y =
      run("slice", {iota(DType::I64, {1, 128})}, attrs({{"starts", I{0, 0}}, {"ends", I{1, 5}}, {"steps", I{1, 1}}}));
  EXPECT_EQ(values(y), (std::vector<double>{0, 1, 2, 3, 4}));
  // An end that may pass the dim (seq up to 200 > 128: ONNX clamps, a size
  // that is no polynomial), no ranges, an undeclared symbol, a step of 2 or
  // a negative coefficient: refused as before.
  const std::vector<SymbolDecl> wide = {{"seq", 1, 200}};
  EXPECT_THROW(ops::canonical_slice({1, 128}, {0}, {seq}, {1}, {}, true, &wide), Unsupported);
  EXPECT_THROW(ops::canonical_slice({1, 128}, {0}, {seq}, {1}, {}, true), Unsupported);
  EXPECT_THROW(ops::canonical_slice({1, 128}, {0}, {symbol_dim("other")}, {1}, {}, true, &ranges), Unsupported);
  EXPECT_THROW(ops::canonical_slice({1, 128}, {0}, {seq}, {1}, {2}, true, &ranges), Unsupported);
  EXPECT_THROW(ops::canonical_slice({1, 128}, {0}, {dim_sub(64, seq)}, {1}, {}, true, &ranges), Unsupported);
  EXPECT_FALSE(ops::symbolic_end_within(seq, 2, 128, ranges));  // seq = 1 ends before start 2
  EXPECT_TRUE(ops::symbolic_end_within(dim_mul(seq, 4), 0, 128, ranges));
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

}  // namespace
}  // namespace kiln
