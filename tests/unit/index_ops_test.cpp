// The index family beyond what the ONNX node tests reach: out-of-range
// indices are errors naming the node (never out-of-bounds reads), negative
// indices wrap, repeated scatter indices combine under every reduction,
// data moves bit-exactly in every dtype, operand dtypes are checked, and the
// ONNX adapters hoist compile-time operands (or say plainly when they can't).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <functional>
#include <tuple>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/registry.h"
#include "tests/unit/error_of.h"

namespace kiln {
namespace {

// The description kernels and inference put in front of their messages.
std::string label_of(const std::string& op) { return fmt::format("node \"n\" ({})", op); }

// Runs one kiln op on constant operands: inference (which sees the operands'
// values, as the frontend's would for constants) then the reference kernel.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& ins, const AttrMap& attrs = {},
                           int num_outputs = 1) {
  Graph g;
  std::vector<Value*> vals;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < ins.size(); ++i) vals.push_back(g.add_constant(fmt::format("c{}", i), ins[i]));
  for (Value* v : vals) ptrs.push_back(&v->data());
  const OpDef& def = op_registry().get(op);
  InferContext ic(op, vals, attrs, num_outputs, label_of(op));
  std::vector<TensorType> types = infer_types(def, ic);
  return evaluate_op(def, attrs, ptrs, types, label_of(op));
}

Tensor run1(const std::string& op, const std::vector<Tensor>& ins, const AttrMap& attrs = {}) {
  return run_op(op, ins, attrs)[0];
}

// Inference only, with the operands as runtime values of the given types.
std::vector<TensorType> infer_only(const std::string& op, const std::vector<TensorType>& types,
                                   const AttrMap& attrs = {}, int num_outputs = 1) {
  Graph g;
  std::vector<Value*> vals;
  for (size_t i = 0; i < types.size(); ++i) vals.push_back(g.add_input(fmt::format("x{}", i), types[i]));
  InferContext ic(op, vals, attrs, num_outputs, label_of(op));
  return infer_types(op_registry().get(op), ic);
}

using testing::error_of;

AttrMap attrs(std::initializer_list<std::pair<const char*, Attribute>> kv) {
  AttrMap a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

Tensor f32(Shape s, std::vector<double> v) { return Tensor::from<double>(DType::F32, std::move(s), v); }
Tensor i64(Shape s, std::vector<int64_t> v) { return Tensor::from<int64_t>(DType::I64, std::move(s), v); }
Tensor i32(Shape s, std::vector<int64_t> v) { return Tensor::from<int64_t>(DType::I32, std::move(s), v); }

std::vector<double> values(const Tensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_double(i));
  return r;
}

// ---------------------------------------------------------------------------
// gather family

TEST(IndexGather, AxisOneWithNegativeIndices) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  for (Tensor idx : {i64({2}, {-1, 0}), i32({2}, {-1, 0})}) {
    Tensor y = run1("gather", {x, idx}, attrs({{"axis", int64_t(1)}}));
    EXPECT_EQ(y.shape(), Shape({2, 2}));
    EXPECT_EQ(values(y), std::vector<double>({3, 1, 6, 4}));
  }
}

TEST(IndexGather, ScalarIndexDropsTheAxis) {
  Tensor y = run1("gather", {f32({3, 2}, {1, 2, 3, 4, 5, 6}), i64({}, {-2})});
  EXPECT_EQ(y.shape(), Shape({2}));
  EXPECT_EQ(values(y), std::vector<double>({3, 4}));
}

TEST(IndexGather, OutOfRangeIndexIsAnErrorNamingTheNode) {
  Tensor x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  for (int64_t bad : {int64_t(3), int64_t(-4), int64_t(1) << 40}) {
    std::string e = error_of([&] { run1("gather", {x, i64({2}, {0, bad})}); });
    EXPECT_NE(e.find("node \"n\" (gather)"), std::string::npos) << e;
    EXPECT_NE(e.find(std::to_string(bad) + " is out of range [-3, 3)"), std::string::npos) << e;
  }
  // A gather from an empty axis has no valid index at all.
  EXPECT_NE(error_of([&] {
              run1("gather", {f32({0, 2}, {}), i64({1}, {0})});
            }).find("out of range"),
            std::string::npos);
}

TEST(IndexGather, MovesEveryDtypeBitExactly) {
  // f16 NaN payloads and -0, bf16 and u64 patterns survive a gather unchanged.
  Tensor h(DType::F16, {3});
  h.data<uint16_t>()[0] = 0x7e01;  // NaN with payload
  h.data<uint16_t>()[1] = 0x8000;  // -0
  h.data<uint16_t>()[2] = 0x3c00;  // 1
  Tensor yh = run1("gather", {h, i64({3}, {2, 0, 1})});
  EXPECT_EQ(yh.dtype(), DType::F16);
  EXPECT_EQ(yh.data<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(yh.data<uint16_t>()[1], 0x7e01);
  EXPECT_EQ(yh.data<uint16_t>()[2], 0x8000);
  Tensor u(DType::U64, {2});
  u.data<uint64_t>()[0] = 0xfedcba9876543210ull;
  u.data<uint64_t>()[1] = 7;
  Tensor yu = run1("gather_elements", {u, i32({2}, {0, 0})});
  EXPECT_EQ(yu.data<uint64_t>()[1], 0xfedcba9876543210ull);
  Tensor b = Tensor::from<int>(DType::Bool, {2, 2}, {1, 0, 0, 1});
  Tensor yb = run1("gather_nd", {b, i64({2, 2}, {1, 1, 0, 1})});
  EXPECT_EQ(yb.dtype(), DType::Bool);
  EXPECT_EQ(values(yb), std::vector<double>({1, 0}));
}

TEST(IndexGather, LargeEmbeddingTable) {
  // BERT's word embedding: one row per token, checked against the table.
  const int64_t vocab = 30522, dim = 768;
  Tensor table(DType::F32, {vocab, dim});
  float* p = table.data<float>();
  for (int64_t i = 0; i < vocab * dim; ++i) p[i] = static_cast<float>(i % 100003) * 0.5f;
  std::vector<int64_t> ids;
  for (int64_t j = 0; j < 128; ++j) ids.push_back((j * 7919) % vocab);
  ids[5] = -1;  // the last row
  Tensor y = run1("gather", {table, i64({1, 128}, ids)});
  ASSERT_EQ(y.shape(), Shape({1, 128, dim}));
  for (int64_t j = 0; j < 128; ++j) {
    int64_t row = ids[j] < 0 ? ids[j] + vocab : ids[j];
    for (int64_t k : {int64_t(0), dim / 2, dim - 1})
      ASSERT_EQ(y.data<float>()[j * dim + k], p[row * dim + k]) << j << "," << k;
  }
}

TEST(IndexGather, ElementsNegativeAndOutOfRange) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = run1("gather_elements", {x, i64({2, 2}, {-1, 0, 1, -3})}, attrs({{"axis", int64_t(1)}}));
  EXPECT_EQ(values(y), std::vector<double>({3, 1, 5, 4}));
  // axis 0 with indices smaller than data in the other dim
  y = run1("gather_elements", {x, i32({1, 2}, {1, -2})});
  EXPECT_EQ(values(y), std::vector<double>({4, 2}));
  std::string e = error_of([&] { run1("gather_elements", {x, i64({1, 1}, {2})}); });
  EXPECT_NE(e.find("gather_elements index 2 is out of range [-2, 2)"), std::string::npos) << e;
}

TEST(IndexGather, NdWithBatchDims) {
  // data [2,2,2], batch_dims 1, indices [2,1,1]: out[b] = data[b, idx[b]]
  Tensor x = f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor y = run1("gather_nd", {x, i64({2, 1, 1}, {1, -2})}, attrs({{"batch_dims", int64_t(1)}}));
  EXPECT_EQ(y.shape(), Shape({2, 1, 2}));
  EXPECT_EQ(values(y), std::vector<double>({2, 3, 4, 5}));
  // full-rank tuples pick single elements
  y = run1("gather_nd", {x, i64({2, 3}, {1, 1, 1, 0, -1, 0})});
  EXPECT_EQ(y.shape(), Shape({2}));
  EXPECT_EQ(values(y), std::vector<double>({7, 2}));
  std::string e = error_of([&] { run1("gather_nd", {x, i64({1, 2}, {0, 2})}); });
  EXPECT_NE(e.find("out of range [-2, 2)"), std::string::npos) << e;
}

TEST(IndexGather, InferenceChecks) {
  TensorType d(DType::F32, {3, 4});
  EXPECT_NE(error_of([&] {
              infer_only("gather", {d, TensorType(DType::F32, {2})});
            }).find("must be i32 or i64"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              infer_only("gather", {d, TensorType(DType::I64, {2})}, attrs({{"axis", int64_t(2)}}));
            }).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              infer_only("gather_elements", {d, TensorType(DType::I64, {2, 5})});
            }).find("indices dim 1 is 5 but data's is only 4"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              infer_only("gather_nd", {d, TensorType(DType::I64, {2, 3})});
            }).find("last dim 3 must be in [1, 2]"),
            std::string::npos);
  EXPECT_EQ(infer_only("gather", {d, TensorType(DType::I32, {5, 6})}, attrs({{"axis", int64_t(-1)}}))[0],
            TensorType(DType::F32, {3, 5, 6}));
}

// ---------------------------------------------------------------------------
// scatter family

TEST(IndexScatter, DuplicateIndicesCombineUnderEachReduction) {
  // data [1,2,3,4], updates 10 and 20 both at index 1 (once as -3), 5 at index 3.
  Tensor x = f32({4}, {1, 2, 3, 4});
  Tensor idx = i64({3}, {1, -3, 3});
  Tensor upd = f32({3}, {10, 20, 5});
  auto run = [&](const char* red, DType dt) {
    return values(run1("scatter_elements", {x.cast(dt), idx, upd.cast(dt)}, attrs({{"reduction", std::string(red)}})));
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I16, DType::F64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    EXPECT_EQ(run("none", dt), std::vector<double>({1, 20, 3, 5}));
    EXPECT_EQ(run("add", dt), std::vector<double>({1, 32, 3, 9}));
    EXPECT_EQ(run("mul", dt), std::vector<double>({1, 400, 3, 20}));
    EXPECT_EQ(run("max", dt), std::vector<double>({1, 20, 3, 5}));
    EXPECT_EQ(run("min", dt), std::vector<double>({1, 2, 3, 4}));
  }
}

TEST(IndexScatter, IntegerReductionsWrapAndBoolIsLogical) {
  Tensor x = Tensor::from<int64_t>(DType::I8, {1}, {100});
  Tensor y = run1("scatter_elements", {x, i64({2}, {0, 0}), Tensor::from<int64_t>(DType::I8, {2}, {20, 10})},
                  attrs({{"reduction", std::string("add")}}));
  EXPECT_EQ(y.data<int8_t>()[0], int8_t(-126));  // 130 wraps
  Tensor b = Tensor::from<int>(DType::Bool, {2}, {0, 1});
  Tensor bu = Tensor::from<int>(DType::Bool, {2}, {1, 0});
  Tensor add = run1("scatter_elements", {b, i64({2}, {0, 1}), bu}, attrs({{"reduction", std::string("add")}}));
  Tensor mul = run1("scatter_elements", {b, i64({2}, {0, 1}), bu}, attrs({{"reduction", std::string("mul")}}));
  EXPECT_EQ(values(add), std::vector<double>({1, 1}));
  EXPECT_EQ(values(mul), std::vector<double>({0, 0}));
}

TEST(IndexScatter, MaxMinPropagateNaN) {
  Tensor x = f32({2}, {1, NAN});
  Tensor y =
      run1("scatter_elements", {x, i64({2}, {0, 1}), f32({2}, {NAN, 5})}, attrs({{"reduction", std::string("max")}}));
  EXPECT_TRUE(std::isnan(y.get_double(0)));
  EXPECT_TRUE(std::isnan(y.get_double(1)));
}

TEST(IndexScatter, ElementsAlongAxisOne) {
  Tensor x = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  Tensor y = run1("scatter_elements", {x, i32({2, 2}, {2, -3, 1, 1}), f32({2, 2}, {1, 2, 3, 4})},
                  attrs({{"axis", int64_t(1)}, {"reduction", std::string("add")}}));
  EXPECT_EQ(values(y), std::vector<double>({2, 0, 1, 0, 7, 0}));
}

TEST(IndexScatter, NdSlicesWithDuplicates) {
  // data [3,2]; rows 0 and 2 (as -1) get updates, row 2 twice.
  Tensor x = f32({3, 2}, {1, 1, 1, 1, 1, 1});
  Tensor idx = i64({3, 1}, {2, 0, -1});
  Tensor upd = f32({3, 2}, {2, 3, 4, 5, 6, 7});
  EXPECT_EQ(values(run1("scatter_nd", {x, idx, upd}, attrs({{"reduction", std::string("mul")}}))),
            std::vector<double>({4, 5, 1, 1, 12, 21}));
  EXPECT_EQ(values(run1("scatter_nd", {x, idx, upd})), std::vector<double>({4, 5, 1, 1, 6, 7}));
  EXPECT_EQ(values(run1("scatter_nd", {x, idx, upd}, attrs({{"reduction", std::string("min")}}))),
            std::vector<double>({1, 1, 1, 1, 1, 1}));
}

TEST(IndexScatter, OutOfRangeIsAnError) {
  Tensor x = f32({2, 2}, {0, 0, 0, 0});
  std::string e = error_of([&] { run1("scatter_elements", {x, i64({1, 1}, {-3}), f32({1, 1}, {1})}); });
  EXPECT_NE(e.find("node \"n\" (scatter_elements): scatter_elements index -3 is out of range [-2, 2)"),
            std::string::npos)
      << e;
  e = error_of([&] { run1("scatter_nd", {x, i64({1, 2}, {0, 2}), f32({1}, {1})}); });
  EXPECT_NE(e.find("scatter_nd index 2 is out of range"), std::string::npos) << e;
}

TEST(IndexScatter, InferenceChecks) {
  TensorType d(DType::F32, {3, 4});
  TensorType ix(DType::I64, {2, 4});
  EXPECT_NE(error_of([&] {
              infer_only("scatter_elements", {d, ix, TensorType(DType::F16, {2, 4})});
            }).find("updates are f16 but data is f32"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              infer_only("scatter_elements", {d, ix, TensorType(DType::F32, {2, 3})});
            }).find("updates shape [2,3] differs"),
            std::string::npos);
  EXPECT_THROW(infer_only("scatter_nd", {d, TensorType(DType::I64, {2, 1}), TensorType(DType::F32, {2, 4})},
                          attrs({{"reduction", std::string("sub")}})),
               Unsupported);
  EXPECT_NE(error_of([&] {
              infer_only("scatter_nd", {d, TensorType(DType::I64, {2, 1}), TensorType(DType::F32, {2, 3})});
            }).find("should be [2,4]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              infer_only("scatter_nd", {d, TensorType(DType::F32, {2, 1}), d});
            }).find("must be i32 or i64"),
            std::string::npos);
}

// ---------------------------------------------------------------------------
// one_hot, trilu, eye_like, reverse_sequence

TEST(IndexOneHot, NegativeOutOfRangeAndFloatIndices) {
  // depth 3, axis -1: -1 -> 2, 3 and -4 -> all off, 1.7 -> 1
  Tensor idx = f32({5}, {0, -1, 3, -4, 1.7});
  Tensor vals = Tensor::from<int64_t>(DType::I32, {2}, {-5, 9});
  Tensor y = run1("one_hot", {idx, vals}, attrs({{"depth", int64_t(3)}}));
  EXPECT_EQ(y.dtype(), DType::I32);
  EXPECT_EQ(y.shape(), Shape({5, 3}));
  EXPECT_EQ(values(y), std::vector<double>({9, -5, -5, -5, -5, 9, -5, -5, -5, -5, -5, -5, -5, 9, -5}));
  // axis 0 puts depth first
  y = run1("one_hot", {i64({2}, {2, 0}), f32({2}, {0, 1})}, attrs({{"depth", int64_t(3)}, {"axis", int64_t(0)}}));
  EXPECT_EQ(y.shape(), Shape({3, 2}));
  EXPECT_EQ(values(y), std::vector<double>({0, 1, 0, 0, 1, 0}));
  EXPECT_NE(error_of([&] {
              run1("one_hot", {idx, f32({3}, {0, 1, 2})}, attrs({{"depth", int64_t(3)}}));
            }).find("exactly two elements"),
            std::string::npos);
}

TEST(IndexTrilu, DiagonalsAndRanges) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto tri = [&](int64_t upper, int64_t k) { return values(run1("trilu", {x}, attrs({{"upper", upper}, {"k", k}}))); };
  EXPECT_EQ(tri(1, 0), std::vector<double>({1, 2, 3, 0, 5, 6}));
  EXPECT_EQ(tri(1, 1), std::vector<double>({0, 2, 3, 0, 0, 6}));
  EXPECT_EQ(tri(0, -1), std::vector<double>({0, 0, 0, 4, 0, 0}));
  EXPECT_EQ(tri(0, 0), std::vector<double>({1, 0, 0, 4, 5, 0}));
  EXPECT_EQ(tri(1, int64_t(1) << 62), std::vector<double>({0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(tri(0, int64_t(1) << 62), std::vector<double>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(tri(1, -(int64_t(1) << 62)), std::vector<double>({1, 2, 3, 4, 5, 6}));
}

TEST(IndexEyeLike, OffDiagonalAndDtype) {
  Tensor x = f32({3, 2}, {9, 9, 9, 9, 9, 9});
  Tensor y = run1("eye_like", {x}, attrs({{"k", int64_t(-1)}, {"dtype", std::string("i64")}}));
  EXPECT_EQ(y.dtype(), DType::I64);
  EXPECT_EQ(values(y), std::vector<double>({0, 0, 1, 0, 0, 1}));
  y = run1("eye_like", {x}, attrs({{"k", int64_t(5)}}));
  EXPECT_EQ(values(y), std::vector<double>({0, 0, 0, 0, 0, 0}));
  EXPECT_NE(error_of([&] {
              run1("eye_like", {x}, attrs({{"dtype", std::string("f8")}}));
            }).find("unknown dtype"),
            std::string::npos);
}

TEST(IndexReverseSequence, LengthsAndErrors) {
  // time_axis 0, batch_axis 1: x[t, b]
  Tensor x = f32({3, 2}, {0, 10, 1, 11, 2, 12});
  Tensor y = run1("reverse_sequence", {x, i64({2}, {3, 2})});
  EXPECT_EQ(values(y), std::vector<double>({2, 11, 1, 10, 0, 12}));
  std::string e = error_of([&] { run1("reverse_sequence", {x, i64({2}, {4, 0})}); });
  EXPECT_NE(e.find("sequence_lens[0] = 4 is outside [0, 3]"), std::string::npos) << e;
  EXPECT_NE(error_of([&] {
              run1("reverse_sequence", {x, i64({3}, {1, 1, 1})});
            }).find("one length per batch"),
            std::string::npos);
}

// ---------------------------------------------------------------------------
// data-dependent shapes

TEST(IndexSelect, NonZeroCountsNegativeZeroAsZero) {
  Tensor h(DType::F16, {2, 2});
  h.data<uint16_t>()[0] = 0x8000;  // -0
  h.data<uint16_t>()[1] = 0x7e00;  // NaN
  h.data<uint16_t>()[2] = 0x0001;  // smallest subnormal
  h.data<uint16_t>()[3] = 0x0000;
  Tensor y = run1("nonzero", {h});
  EXPECT_EQ(y.dtype(), DType::I64);
  EXPECT_EQ(y.shape(), Shape({2, 2}));
  EXPECT_EQ(values(y), std::vector<double>({0, 1, 1, 0}));  // (0,1) and (1,0)
  y = run1("nonzero", {Tensor::scalar(DType::I32, 5)});
  EXPECT_EQ(y.shape(), Shape({1, 1}));
}

TEST(IndexSelect, ShapeDecidingOperandMustBeKnown) {
  std::string e = error_of([] { infer_only("nonzero", {TensorType(DType::F32, {4})}); });
  EXPECT_NE(e.find("must be known at compile time"), std::string::npos) << e;
  e = error_of([] { infer_only("compress", {TensorType(DType::F32, {4}), TensorType(DType::Bool, {4})}); });
  EXPECT_NE(e.find("must be known at compile time"), std::string::npos) << e;
  e = error_of([] { infer_only("unique", {TensorType(DType::F32, {4})}, {}, 4); });
  EXPECT_NE(e.find("must be known at compile time"), std::string::npos) << e;
}

TEST(IndexSelect, CompressAxisFlattenAndErrors) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor cond = Tensor::from<int>(DType::Bool, {2}, {0, 1});
  Tensor y = run1("compress", {x, cond}, attrs({{"axis", int64_t(1)}}));
  EXPECT_EQ(y.shape(), Shape({2, 1}));
  EXPECT_EQ(values(y), std::vector<double>({2, 5}));
  y = run1("compress", {x, Tensor::from<int>(DType::Bool, {5}, {1, 0, 0, 0, 1})});
  EXPECT_EQ(values(y), std::vector<double>({1, 5}));
  EXPECT_NE(error_of([&] {
              run1("compress", {x, Tensor::from<int>(DType::Bool, {3}, {0, 0, 1})}, attrs({{"axis", int64_t(0)}}));
            }).find("condition is true at 2 but the selected axis has only 2 entries"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              run1("compress", {x, i64({2}, {1, 1})});
            }).find("condition must be bool"),
            std::string::npos);
}

TEST(IndexSelect, UniqueSortedAndFirstOccurrenceOrder) {
  Tensor x = i64({6}, {3, 1, 3, -2, 1, 3});
  std::vector<Tensor> s = run_op("unique", {x}, {}, 4);
  EXPECT_EQ(values(s[0]), std::vector<double>({-2, 1, 3}));
  EXPECT_EQ(values(s[1]), std::vector<double>({3, 1, 0}));
  EXPECT_EQ(values(s[2]), std::vector<double>({2, 1, 2, 0, 1, 2}));
  EXPECT_EQ(values(s[3]), std::vector<double>({1, 2, 3}));
  std::vector<Tensor> u = run_op("unique", {x}, attrs({{"sorted", int64_t(0)}}), 4);
  EXPECT_EQ(values(u[0]), std::vector<double>({3, 1, -2}));
  EXPECT_EQ(values(u[1]), std::vector<double>({0, 1, 3}));
  EXPECT_EQ(values(u[2]), std::vector<double>({0, 1, 0, 2, 1, 0}));
  EXPECT_EQ(values(u[3]), std::vector<double>({3, 2, 1}));
  // Only y asked for.
  std::vector<Tensor> y = run_op("unique", {x}, {}, 1);
  EXPECT_EQ(y.size(), 1u);
  EXPECT_EQ(values(y[0]), std::vector<double>({-2, 1, 3}));
}

TEST(IndexSelect, UniqueSlicesAndNaN) {
  // rows [1,0] [0,5] [1,0] along axis 0: sorted lexicographically
  Tensor x = Tensor::from<int64_t>(DType::U8, {3, 2}, {1, 0, 0, 5, 1, 0});
  std::vector<Tensor> r = run_op("unique", {x}, attrs({{"axis", int64_t(0)}}), 4);
  EXPECT_EQ(r[0].shape(), Shape({2, 2}));
  EXPECT_EQ(values(r[0]), std::vector<double>({0, 5, 1, 0}));
  EXPECT_EQ(values(r[2]), std::vector<double>({1, 0, 1}));
  // NaNs collapse into one entry placed last; f16 compares by value
  Tensor h = f32({4}, {NAN, 2, NAN, -1}).cast(DType::F16);
  r = run_op("unique", {h}, {}, 4);
  ASSERT_EQ(r[0].numel(), 3);
  EXPECT_EQ(r[0].get_double(0), -1);
  EXPECT_EQ(r[0].get_double(1), 2);
  EXPECT_TRUE(std::isnan(r[0].get_double(2)));
  EXPECT_EQ(values(r[3]), std::vector<double>({1, 1, 2}));
}

// ---------------------------------------------------------------------------
// ONNX adapters

// A one-node model: inputs (name, elem_type, dims), the node, one output.
onnx::ModelProto one_node(const std::string& op, std::vector<std::tuple<std::string, int, Shape>> inputs,
                          int64_t opset = 13, std::function<void(onnx::NodeProto*)> edit = {}) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("the_node");
  for (auto& [name, et, dims] : inputs) {
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(et);
    tt->mutable_shape();
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
    n->add_input(name);
  }
  n->add_output("y");
  g->add_output()->set_name("y");
  if (edit) edit(n);
  return m;
}

ImportResult import(const onnx::ModelProto& m, const ImportOptions& o = {}) {
  return import_onnx_bytes(m.SerializeAsString(), ".", "model.onnx", o);
}

TEST(IndexAdapters, OneHotDepthBecomesAnAttribute) {
  using TP = onnx::TensorProto;
  auto m = one_node("OneHot", {{"i", TP::INT64, {2}}, {"depth", TP::FLOAT, {}}, {"v", TP::FLOAT, {2}}}, 11);
  std::string e = error_of([&] { import(m); });
  EXPECT_NE(e.find("OneHot depth (operand 1, \"depth\") must be known at compile time"), std::string::npos) << e;
  ImportOptions o;
  o.known_inputs["depth"] = Tensor::scalar(DType::F32, 4.0);
  ImportResult r = import(m, o);
  const Node* n = r.graph->node_list().back();
  EXPECT_EQ(n->op(), "one_hot");
  EXPECT_EQ(n->attrs().get_int("depth", 0), 4);
  EXPECT_EQ(n->attrs().get_int("axis", 0), -1);
  EXPECT_EQ(r.graph->outputs()[0]->type(), TensorType(DType::F32, {2, 4}));
}

TEST(IndexAdapters, OldScatterAndTriluK) {
  using TP = onnx::TensorProto;
  auto m = one_node("Scatter", {{"d", TP::FLOAT, {2, 3}}, {"i", TP::INT64, {2, 1}}, {"u", TP::FLOAT, {2, 1}}}, 9,
                    [](onnx::NodeProto* n) {
                      auto* a = n->add_attribute();
                      a->set_name("axis");
                      a->set_type(onnx::AttributeProto::INT);
                      a->set_i(-1);
                    });
  ImportResult r = import(m);
  const Node* n = r.graph->node_list().back();
  EXPECT_EQ(n->op(), "scatter_elements");
  EXPECT_EQ(n->attrs().get_int("axis", -1), 1);
  EXPECT_EQ(n->attrs().get_string("reduction", ""), "none");

  auto t = one_node("Trilu", {{"x", TP::FLOAT, {3, 3}}, {"k", TP::INT64, {}}}, 14);
  ImportOptions o;
  o.known_inputs["k"] = Tensor::scalar(DType::I64, -1);
  r = import(t, o);
  n = r.graph->node_list().back();
  EXPECT_EQ(n->op(), "trilu");
  EXPECT_EQ(n->attrs().get_int("k", 0), -1);
  EXPECT_EQ(n->attrs().get_int("upper", 0), 1);
  EXPECT_EQ(r.graph->inputs().size(), 1u);  // k was frozen into a constant
}

TEST(IndexAdapters, UnknownAttributeIsUnsupported) {
  using TP = onnx::TensorProto;
  auto m = one_node("Gather", {{"d", TP::FLOAT, {2, 3}}, {"i", TP::INT64, {2}}}, 13, [](onnx::NodeProto* n) {
    auto* a = n->add_attribute();
    a->set_name("mode");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(1);
  });
  EXPECT_THROW(import(m), Unsupported);
}

}  // namespace
}  // namespace kiln
