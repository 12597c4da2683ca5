// Elementwise ops at their edges, where the ONNX conformance data does not
// look: NaN propagation, integer division and remainder signs, rounding ties,
// cast saturation and rounding, f16 arithmetic, uint64, broadcasting, dtype
// errors, and the ONNX adapters' old-opset forms. Expected values are worked
// out by hand or with numpy (noted where it matters).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/registry.h"

namespace kiln {
namespace {

std::vector<TensorType> infer(const std::string& op, const std::vector<TensorType>& ins, const AttrMap& attrs = {},
                              int num_outputs = 1) {
  Graph g;
  std::vector<Value*> vals;
  for (size_t i = 0; i < ins.size(); ++i) vals.push_back(g.add_input(fmt::format("in{}", i), ins[i]));
  InferContext ic(op, vals, attrs, num_outputs, "node");
  return infer_types(op_registry().get(op), ic);
}

// Infers and evaluates one op on the reference path.
Tensor run(const std::string& op, const std::vector<Tensor>& ins, const AttrMap& attrs = {}) {
  std::vector<TensorType> types;
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ins) {
    types.push_back(t.type());
    ptrs.push_back(&t);
  }
  std::vector<TensorType> out = infer(op, types, attrs);
  return evaluate_op(op_registry().get(op), attrs, ptrs, out, "node")[0];
}

template <typename T>
Tensor tensor(DType dt, Shape s, std::vector<T> v) {
  return Tensor::from<T>(dt, std::move(s), v);
}
Tensor f32(std::vector<float> v) { return tensor<float>(DType::F32, {int64_t(v.size())}, v); }
Tensor i32(std::vector<int32_t> v) { return tensor<int32_t>(DType::I32, {int64_t(v.size())}, v); }

std::vector<double> doubles(const Tensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_double(i));
  return r;
}

// Runs `f`, expecting a kiln::Error; returns its message and whether it was
// an Unsupported.
std::pair<std::string, bool> error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Unsupported& e) {
    return {e.what(), true};
  } catch (const Error& e) {
    return {e.what(), false};
  }
  ADD_FAILURE() << "no error";
  return {"", false};
}

AttrMap attrs(std::initializer_list<std::pair<const char*, Attribute>> kv) {
  AttrMap a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

TEST(ElementwiseOps, NanPropagatesThroughMaxMinRelu) {
  Tensor a = f32({NAN, 1, -1});
  Tensor b = f32({0, NAN, -2});
  Tensor mx = run("max", {a, b}), mn = run("min", {a, b}), r = run("relu", {a});
  EXPECT_TRUE(std::isnan(mx.get_double(0)));
  EXPECT_TRUE(std::isnan(mx.get_double(1)));
  EXPECT_EQ(mx.get_double(2), -1);
  EXPECT_TRUE(std::isnan(mn.get_double(0)));
  EXPECT_TRUE(std::isnan(mn.get_double(1)));
  EXPECT_EQ(mn.get_double(2), -2);
  EXPECT_TRUE(std::isnan(r.get_double(0)));
  EXPECT_EQ(doubles(r)[1], 1);
  EXPECT_EQ(doubles(r)[2], 0);
  // clip keeps NaN; hard_sigmoid too.
  EXPECT_TRUE(
      std::isnan(run("clip", {a, Tensor::scalar(DType::F32, 0), Tensor::scalar(DType::F32, 0.5)}).get_double(0)));
  EXPECT_TRUE(std::isnan(run("hard_sigmoid", {a}).get_double(0)));
}

TEST(ElementwiseOps, IntegerDivisionTruncatesAndRemaindersFollowTheirSign) {
  Tensor a = i32({7, -7, 7, -7, 5});
  Tensor b = i32({2, 2, -2, -2, 0});
  EXPECT_EQ(run("div", {a, b}).to_int_vector(), (std::vector<int64_t>{3, -3, -3, 3, 0}));
  EXPECT_EQ(run("mod", {a, b}).to_int_vector(), (std::vector<int64_t>{1, 1, -1, -1, 0}));   // divisor's sign
  EXPECT_EQ(run("fmod", {a, b}).to_int_vector(), (std::vector<int64_t>{1, -1, 1, -1, 0}));  // dividend's sign
  // Python-style float remainder: -7.5 % 2 = 0.5; C fmod: -1.5.
  EXPECT_EQ(run("mod", {f32({-7.5f}), f32({2})}).get_double(0), 0.5);
  EXPECT_EQ(run("fmod", {f32({-7.5f}), f32({2})}).get_double(0), -1.5);
  // INT64_MIN / -1 and % -1 trap in C; kiln wraps / gives 0.
  int64_t lo = std::numeric_limits<int64_t>::min();
  Tensor x = tensor<int64_t>(DType::I64, {1}, {lo}), m1 = tensor<int64_t>(DType::I64, {1}, {-1});
  EXPECT_EQ(run("div", {x, m1}).get_int(0), lo);
  EXPECT_EQ(run("mod", {x, m1}).get_int(0), 0);
  EXPECT_EQ(run("fmod", {x, m1}).get_int(0), 0);
}

TEST(ElementwiseOps, RoundTiesToEven) {
  Tensor r = run("round", {f32({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4999998f})});
  EXPECT_EQ(doubles(r), (std::vector<double>{0, 2, 2, -0.0, -2, -2, 2}));  // numpy.round
  EXPECT_TRUE(std::signbit(r.get_double(3)));
}

TEST(ElementwiseOps, CastFloatToIntTruncatesAndSaturates) {
  Tensor x = f32({NAN, 300, -5, 1e10f, -1e10f, 2.9f, -2.9f});
  AttrMap to_u8 = attrs({{"to", std::string("u8")}}), to_i32 = attrs({{"to", std::string("i32")}});
  EXPECT_EQ(run("cast", {x}, to_u8).to_int_vector(), (std::vector<int64_t>{0, 255, 0, 255, 0, 2, 0}));
  EXPECT_EQ(run("cast", {x}, to_i32).to_int_vector(),
            (std::vector<int64_t>{0, 300, -5, 2147483647, -2147483648LL, 2, -2}));
  Tensor u64 = run("cast", {f32({1e20f, -1, 3.5f})}, attrs({{"to", std::string("u64")}}));
  EXPECT_EQ(u64.data<uint64_t>()[0], std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(u64.data<uint64_t>()[1], 0u);
  EXPECT_EQ(u64.data<uint64_t>()[2], 3u);
  // Integers wrap as two's complement (numpy: np.int32(300).astype(np.int8) == 44).
  EXPECT_EQ(run("cast", {i32({300, -129})}, attrs({{"to", std::string("i8")}})).to_int_vector(),
            (std::vector<int64_t>{44, 127}));
  // To bool: x != 0, NaN is true.
  EXPECT_EQ(run("cast", {f32({0, -0.0f, NAN, 0.1f})}, attrs({{"to", std::string("bool")}})).to_int_vector(),
            (std::vector<int64_t>{0, 0, 1, 1}));
}

TEST(ElementwiseOps, CastToHalfRoundsOnceToNearestEven) {
  AttrMap to_f16 = attrs({{"to", std::string("f16")}});
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even wins. 70000 overflows.
  Tensor h = run("cast", {f32({1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 70000, -70000})}, to_f16);
  EXPECT_EQ(doubles(h), (std::vector<double>{1.0, 1.0 + 0x1p-9, INFINITY, -INFINITY}));
  // Just above the tie, from f64: through f32 it would round twice and land
  // on 1.0; numpy.float16(np.float64(1 + 2**-11 + 2**-40)) == 1.001.
  Tensor d = tensor<double>(DType::F64, {1}, {1.0 + 0x1p-11 + 0x1p-40});
  EXPECT_EQ(run("cast", {d}, to_f16).get_double(0), 1.0 + 0x1p-10);
  EXPECT_EQ(run("cast", {d}, attrs({{"to", std::string("bf16")}})).get_double(0), 1.0);
}

TEST(ElementwiseOps, HalfArithmeticRoundsToHalf) {
  Tensor a = tensor<float>(DType::F16, {3}, {2048, 60000, 0.1f});
  Tensor b = tensor<float>(DType::F16, {3}, {1, 10000, 0.2f});
  Tensor s = run("add", {a, b});
  ASSERT_EQ(s.dtype(), DType::F16);
  // numpy: float16(2048) + float16(1) == 2048; 60000 + 10000 overflows;
  // float16(0.1) + float16(0.2) == 0.2998046875.
  EXPECT_EQ(doubles(s), (std::vector<double>{2048, INFINITY, 0.2998046875}));
}

TEST(ElementwiseOps, UnsignedSixtyFourBitValuesCompareUnsigned) {
  const uint64_t big = (uint64_t(1) << 63) + 5;
  Tensor a = tensor<int64_t>(DType::U64, {2}, {0, 0});
  a.data<uint64_t>()[0] = big;
  a.data<uint64_t>()[1] = 3;
  Tensor b = tensor<int64_t>(DType::U64, {2}, {7, 7});
  Tensor mx = run("max", {a, b});
  EXPECT_EQ(mx.data<uint64_t>()[0], big);
  EXPECT_EQ(mx.data<uint64_t>()[1], 7u);
  EXPECT_EQ(run("greater", {a, b}).to_int_vector(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(run("div", {a, b}).data<uint64_t>()[0], big / 7);
  EXPECT_EQ(run("mod", {a, b}).data<uint64_t>()[0], big % 7);
  EXPECT_EQ(run("cast", {a}, attrs({{"to", std::string("f64")}})).get_double(0), 9223372036854775808.0);
}

TEST(ElementwiseOps, PowKeepsTheBaseDtype) {
  // 3^39 does not fit a double exactly; integer pow must be exact.
  Tensor p = run("pow", {tensor<int64_t>(DType::I64, {1}, {3}), tensor<int64_t>(DType::I64, {1}, {39})});
  EXPECT_EQ(p.get_int(0), 4052555153018976267LL);
  // Integer base, float exponent: computed in floating point, truncated.
  Tensor q = run("pow", {i32({2, 3}), f32({0.5f, 2})});
  EXPECT_EQ(q.dtype(), DType::I32);
  EXPECT_EQ(q.to_int_vector(), (std::vector<int64_t>{1, 9}));
  Tensor r = run("pow", {f32({2, 4}), i32({-1, 3})});
  EXPECT_EQ(doubles(r), (std::vector<double>{0.5, 64}));
}

TEST(ElementwiseOps, SigmoidIsStableForLargeMagnitudes) {
  Tensor s = run("sigmoid", {f32({-1000, 1000, 0})});
  EXPECT_EQ(doubles(s), (std::vector<double>{0, 1, 0.5}));
  Tensor d = run("sigmoid", {tensor<double>(DType::F64, {1}, {-100})});
  EXPECT_NEAR(d.get_double(0) / 3.7200759760208356e-44, 1.0, 1e-12);
  Tensor sp = run("softplus", {f32({1000, -1000})});
  EXPECT_EQ(doubles(sp), (std::vector<double>{1000, 0}));
}

TEST(ElementwiseOps, GeluBothForms) {
  // 0.5 (1 + erf(1/sqrt 2)) and 0.5 (1 + tanh(sqrt(2/pi) * 1.044715)).
  EXPECT_NEAR(run("gelu", {f32({1})}).get_double(0), 0.8413447460685429, 1e-7);
  EXPECT_NEAR(run("gelu", {f32({1})}, attrs({{"approximate", std::string("tanh")}})).get_double(0), 0.8411919906082768,
              1e-7);
  auto [msg, unsup] = error_of([] {
    infer("gelu", {TensorType(DType::F32, {1})}, attrs({{"approximate", std::string("fast")}}));
  });
  EXPECT_FALSE(unsup);
  EXPECT_NE(msg.find("fast"), std::string::npos);
}

TEST(ElementwiseOps, BroadcastShapes) {
  EXPECT_EQ(infer("add", {TensorType(DType::F32, {2, 1, 3}), TensorType(DType::F32, {4, 1})})[0].shape,
            (Shape{2, 4, 3}));
  EXPECT_EQ(infer("where",
                  {TensorType(DType::Bool, {4, 1}), TensorType(DType::I64, {3}), TensorType(DType::I64, {1, 1, 1})})[0],
            TensorType(DType::I64, {1, 4, 3}));
  auto [msg, unsup] = error_of([] { infer("mul", {TensorType(DType::F32, {2, 3}), TensorType(DType::F32, {4})}); });
  EXPECT_FALSE(unsup);
  // prelu and clip may not grow their input.
  EXPECT_FALSE(error_of([] { infer("prelu", {TensorType(DType::F32, {3}), TensorType(DType::F32, {2, 3})}); }).second);
  Tensor y = run("add", {tensor<float>(DType::F32, {2, 1}, {1, 2}), f32({10, 20, 30})});
  EXPECT_EQ(doubles(y), (std::vector<double>{11, 21, 31, 12, 22, 32}));
}

TEST(ElementwiseOps, DtypeErrorsNameTheDtype) {
  auto [msg, unsup] = error_of([] { infer("sqrt", {TensorType(DType::I32, {2})}); });
  EXPECT_TRUE(unsup);
  EXPECT_NE(msg.find("i32"), std::string::npos) << msg;
  EXPECT_TRUE(error_of([] { infer("sigmoid", {TensorType(DType::I64, {2})}); }).second);
  EXPECT_TRUE(error_of([] { infer("neg", {TensorType(DType::U8, {2})}); }).second);
  EXPECT_TRUE(error_of([] { infer("add", {TensorType(DType::Bool, {2}), TensorType(DType::Bool, {2})}); }).second);
  EXPECT_TRUE(error_of([] { infer("and", {TensorType(DType::I32, {2}), TensorType(DType::I32, {2})}); }).second);
  EXPECT_TRUE(error_of([] {
                infer("bit_shift_left", {TensorType(DType::I32, {2}), TensorType(DType::I32, {2})});
              }).second);
  // Mixed dtypes and a non-bool condition are invalid models, not gaps.
  EXPECT_FALSE(error_of([] { infer("add", {TensorType(DType::I32, {2}), TensorType(DType::F32, {2})}); }).second);
  EXPECT_FALSE(
      error_of([] {
        infer("where", {TensorType(DType::F32, {2}), TensorType(DType::F32, {2}), TensorType(DType::F32, {2})});
      }).second);
  EXPECT_FALSE(error_of([] {
                 infer("cast", {TensorType(DType::F32, {2})}, attrs({{"to", std::string("f8")}}));
               }).second);
  EXPECT_FALSE(error_of([] { infer("cast", {TensorType(DType::F32, {2})}); }).second);  // 'to' is required
}

TEST(ElementwiseOps, QuantizeRoundsHalfToEvenAndSaturates) {
  Tensor x = f32({2.5f, 3.5f, -1, 1000, -1000, 5});
  Tensor q = run("quantize_linear", {x, Tensor::scalar(DType::F32, 1), Tensor::scalar(DType::U8, 0)});
  EXPECT_EQ(q.dtype(), DType::U8);
  EXPECT_EQ(q.to_int_vector(), (std::vector<int64_t>{2, 4, 0, 255, 0, 5}));
  Tensor s = run("quantize_linear", {x, Tensor::scalar(DType::F32, 2), Tensor::scalar(DType::I8, -10)});
  // round(x / 2) - 10: 1 - 10, 2 - 10, -0 - 10 (-0.5 ties to even), 127, -128, 2 - 10.
  EXPECT_EQ(s.to_int_vector(), (std::vector<int64_t>{-9, -8, -10, 127, -128, -8}));
  Tensor d = run("dequantize_linear", {tensor<int32_t>(DType::U8, {3}, {0, 128, 255}), Tensor::scalar(DType::F32, 0.5),
                                       Tensor::scalar(DType::U8, 128)});
  EXPECT_EQ(doubles(d), (std::vector<double>{-64, 0, 63.5}));
}

TEST(ElementwiseOps, IsInfAndShifts) {
  Tensor x = f32({INFINITY, -INFINITY, NAN, 1});
  EXPECT_EQ(run("isinf", {x}).to_int_vector(), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(run("isinf", {x}, attrs({{"detect_negative", int64_t(0)}})).to_int_vector(),
            (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(run("isinf", {x}, attrs({{"detect_positive", int64_t(0)}})).to_int_vector(),
            (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(run("isnan", {x}).to_int_vector(), (std::vector<int64_t>{0, 0, 1, 0}));
  Tensor a = tensor<int32_t>(DType::U8, {3}, {1, 255, 16});
  Tensor b = tensor<int32_t>(DType::U8, {3}, {8, 1, 2});
  EXPECT_EQ(run("bit_shift_left", {a, b}).to_int_vector(), (std::vector<int64_t>{0, 254, 64}));
  EXPECT_EQ(run("bit_shift_right", {a, b}).to_int_vector(), (std::vector<int64_t>{0, 127, 4}));
  EXPECT_EQ(run("bitwise_not", {a}).to_int_vector(), (std::vector<int64_t>{254, 0, 239}));
}

// ---- ONNX adapters: one node with constant operands, run on the reference backend.

struct OnnxNode {
  std::string op;
  int64_t opset;
  std::vector<std::optional<Tensor>> inputs;  // nullopt: an absent optional input
  std::function<void(onnx::NodeProto&)> attrs = {};
  int outputs = 1;
};

std::vector<Tensor> run_onnx(const OnnxNode& spec) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(spec.opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(spec.op);
  n->set_name("n");
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (!spec.inputs[i]) {
      n->add_input("");
      continue;
    }
    std::string name = fmt::format("i{}", i);
    *g->add_initializer() = tensor_to_proto(*spec.inputs[i], name);
    n->add_input(name);
  }
  for (int i = 0; i < spec.outputs; ++i) {
    n->add_output(fmt::format("o{}", i));
    g->add_output()->set_name(fmt::format("o{}", i));
  }
  if (spec.attrs) spec.attrs(*n);
  ImportResult imp = import_onnx_bytes(m.SerializeAsString(), ".", "model.onnx", {});
  return ReferenceExecutor(*imp.graph).run({});
}

void attr_int(onnx::NodeProto& n, const char* name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void attr_float(onnx::NodeProto& n, const char* name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

TEST(ElementwiseAdapters, LegacyBroadcastWithAxis) {
  // Add-6, broadcast=1, axis=0: B [2] lines up with A's dim 0.
  Tensor a = tensor<float>(DType::F32, {2, 3}, {0, 0, 0, 0, 0, 0});
  auto y = run_onnx({"Add", 6, {a, f32({1, 2})}, [](onnx::NodeProto& n) {
                       attr_int(n, "broadcast", 1);
                       attr_int(n, "axis", 0);
                     }});
  EXPECT_EQ(doubles(y[0]), (std::vector<double>{1, 1, 1, 2, 2, 2}));
}

TEST(ElementwiseAdapters, ClipBoundsFromAttributesOrOptionalInputs) {
  Tensor x = f32({-5, 0.25f, 5});
  auto old = run_onnx({"Clip", 6, {x}, [](onnx::NodeProto& n) { attr_float(n, "min", -1); }});
  EXPECT_EQ(doubles(old[0]), (std::vector<double>{-1, 0.25, 5}));  // max defaults to FLT_MAX
  auto only_max = run_onnx({"Clip", 13, {x, std::nullopt, Tensor::scalar(DType::F32, 0)}});
  EXPECT_EQ(doubles(only_max[0]), (std::vector<double>{-5, 0, 0}));
  Tensor xi = tensor<int32_t>(DType::I8, {3}, {-128, 0, 127});
  auto ints = run_onnx({"Clip", 13, {xi, Tensor::scalar(DType::I8, -3)}});
  EXPECT_EQ(ints[0].to_int_vector(), (std::vector<int64_t>{-3, 0, 127}));
}

TEST(ElementwiseAdapters, VariadicMeanDividesOnce) {
  auto y = run_onnx({"Mean", 13, {f32({1, 2}), f32({2, 4}), f32({4})}});
  EXPECT_EQ(doubles(y[0]), (std::vector<double>{7.0f / 3, 10.0f / 3}));
  auto one = run_onnx({"Max", 13, {f32({1, NAN})}});
  EXPECT_EQ(one[0].get_double(0), 1);
  EXPECT_TRUE(std::isnan(one[0].get_double(1)));
}

TEST(ElementwiseAdapters, ModFloatNeedsFmod) {
  EXPECT_FALSE(error_of([] { run_onnx({"Mod", 13, {f32({1}), f32({2})}}); }).second);
  auto y = run_onnx({"Mod", 13, {f32({-7}), f32({2})}, [](onnx::NodeProto& n) { attr_int(n, "fmod", 1); }});
  EXPECT_EQ(y[0].get_double(0), -1);
}

TEST(ElementwiseAdapters, DropoutInInference) {
  Tensor x = f32({1, -2, 3});
  auto y = run_onnx({"Dropout", 13, {x, Tensor::scalar(DType::F32, 0.5)}, {}, 2});
  EXPECT_EQ(doubles(y[0]), doubles(x));
  EXPECT_EQ(y[1].dtype(), DType::Bool);
  EXPECT_EQ(y[1].to_int_vector(), (std::vector<int64_t>{1, 1, 1}));
  Tensor yes = Tensor::scalar(DType::Bool, 1);
  auto zero = run_onnx({"Dropout", 13, {x, Tensor::scalar(DType::F32, 0), yes}});  // ratio 0: no randomness
  EXPECT_EQ(doubles(zero[0]), doubles(x));
  auto [msg, unsup] = error_of([&] { run_onnx({"Dropout", 13, {x, Tensor::scalar(DType::F32, 0.3), yes}}); });
  EXPECT_TRUE(unsup);
  EXPECT_NE(msg.find("random"), std::string::npos);
}

TEST(ElementwiseAdapters, PerChannelSlopeAndQuantizationAxis) {
  // PRelu-6: a 1-D slope of C values is per channel.
  Tensor x = tensor<float>(DType::F32, {1, 2, 2}, {-1, 1, -1, 1});
  auto y = run_onnx({"PRelu", 6, {x, f32({0.5f, 2})}});
  EXPECT_EQ(doubles(y[0]), (std::vector<double>{-0.5, 1, -2, 1}));
  // QuantizeLinear along axis 1 of [1, 2, 2].
  Tensor q = tensor<float>(DType::F32, {1, 2, 2}, {2, 4, 2, 4});
  auto r = run_onnx({"QuantizeLinear", 13, {q, f32({2, 4}), tensor<int32_t>(DType::U8, {2}, {0, 10})}});
  EXPECT_EQ(r[0].to_int_vector(), (std::vector<int64_t>{1, 2, 10, 11}));
}

}  // namespace
}  // namespace kiln
