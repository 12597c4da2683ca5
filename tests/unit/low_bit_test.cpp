// ONNX's low-bit types on the host: the codec (ir/low_bit_codec.cuh, the text
// kernels carry too) against ml_dtypes' conversions bit for bit
// (low_bit_golden.inc, written by gen_low_bit_golden.py), every float16 input
// against a brute-force nearest-value search, and ONNX's packed storage.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/low_bit.h"
#include "ir/tensor.h"

namespace kiln {
namespace {

#include "low_bit_golden.inc"

constexpr size_t kInputs = std::size(kLowBitInputs);

struct FloatType {
  DType t;
  const uint8_t* sat;
  const uint8_t* nosat;
  const uint32_t* decoded;
  int codes;
};

const FloatType kFloatTypes[] = {
    {DType::F8E4M3FN, kF8E4M3FNSat, kF8E4M3FNNoSat, kF8E4M3FNDecoded, 256},
    {DType::F8E4M3FNUZ, kF8E4M3FNUZSat, kF8E4M3FNUZNoSat, kF8E4M3FNUZDecoded, 256},
    {DType::F8E5M2, kF8E5M2Sat, kF8E5M2NoSat, kF8E5M2Decoded, 256},
    {DType::F8E5M2FNUZ, kF8E5M2FNUZSat, kF8E5M2FNUZNoSat, kF8E5M2FNUZDecoded, 256},
    {DType::F4E2M1, kF4E2M1Sat, kF4E2M1NoSat, kF4E2M1Decoded, 16},
};

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

TEST(LowBit, FloatCodesMatchMlDtypes) {
  for (const FloatType& ft : kFloatTypes) {
    for (int c = 0; c < ft.codes; ++c)
      EXPECT_TRUE(same_float(low_bit_to_float(ft.t, uint8_t(c)), std::bit_cast<float>(ft.decoded[c])))
          << dtype_name(ft.t) << " code " << c << ": " << low_bit_to_float(ft.t, uint8_t(c));
    int bad = 0;
    for (size_t i = 0; i < kInputs; ++i) {
      float x = std::bit_cast<float>(kLowBitInputs[i]);
      uint8_t s = float_to_low_bit(ft.t, x, true), n = float_to_low_bit(ft.t, x, false);
      if (s != ft.sat[i] && bad++ < 5)
        ADD_FAILURE() << dtype_name(ft.t) << " saturating " << x << ": " << int(s) << " want " << int(ft.sat[i]);
      if (n != ft.nosat[i] && bad++ < 5)
        ADD_FAILURE() << dtype_name(ft.t) << " non-saturating " << x << ": " << int(n) << " want " << int(ft.nosat[i]);
    }
    EXPECT_EQ(bad, 0) << dtype_name(ft.t);
  }
}

TEST(LowBit, E8M0MatchesOnnxNumpyHelper) {
  const uint8_t* want[3][2] = {
      {kF8E8M0_up_0, kF8E8M0_up_1}, {kF8E8M0_down_0, kF8E8M0_down_1}, {kF8E8M0_nearest_0, kF8E8M0_nearest_1}};
  for (int c = 0; c < 256; ++c)
    EXPECT_TRUE(same_float(low_bit_to_float(DType::F8E8M0, uint8_t(c)), std::bit_cast<float>(kF8E8M0Decoded[c])))
        << "code " << c;
  for (int mode = 0; mode < 3; ++mode)
    for (int sat = 0; sat < 2; ++sat)
      for (size_t i = 0; i < kInputs; ++i) {
        float x = std::bit_cast<float>(kLowBitInputs[i]);
        ASSERT_EQ(float_to_low_bit(DType::F8E8M0, x, sat != 0, E8M0Round(mode)), want[mode][sat][i])
            << "mode " << mode << " saturate " << sat << " x " << x;
      }
}

TEST(LowBit, IntegersFromFloatWrapAsMlDtypes) {
  const std::pair<DType, const int8_t*> types[] = {
      {DType::I4, kI4FromFloat}, {DType::U4, kU4FromFloat}, {DType::I2, kI2FromFloat}, {DType::U2, kU2FromFloat}};
  for (auto [t, want] : types)
    for (size_t i = 0; i < kInputs; ++i) {
      float x = std::bit_cast<float>(kLowBitInputs[i]);
      ASSERT_EQ(float_to_low_bit_int(t, x), want[i]) << dtype_name(t) << " x " << x;
    }
  EXPECT_EQ(wrap_low_bit_int(DType::I4, 8), -8);
  EXPECT_EQ(wrap_low_bit_int(DType::I4, -9), 7);
  EXPECT_EQ(wrap_low_bit_int(DType::U2, -1), 3);
  EXPECT_EQ(wrap_low_bit_int(DType::I2, 2), -2);
}

// Every float16 value, saturating: the code of the nearest value the type
// holds (ties to the even code), found by search over ml_dtypes' decoded
// values; beyond the largest finite value, the largest.
TEST(LowBit, EveryHalfRoundsToNearestEven) {
  for (const FloatType& ft : kFloatTypes) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
      float x = half_to_float(uint16_t(h));
      if (std::isnan(x)) continue;
      int best = -1;
      double best_err = INFINITY;
      double max_finite = 0;
      for (int c = 0; c < ft.codes; ++c) {
        float v = std::bit_cast<float>(ft.decoded[c]);
        if (!std::isfinite(v)) continue;
        max_finite = std::max(max_finite, double(v));
        if (std::signbit(v) != std::signbit(x) && v != 0) continue;
        double err = std::fabs(double(v) - double(x));
        if (err < best_err || (err == best_err && (c & 1) == 0 && (best & 1) == 1)) {
          best = c;
          best_err = err;
        }
      }
      float got = low_bit_to_float(ft.t, float_to_low_bit(ft.t, x, true));
      float want = std::bit_cast<float>(ft.decoded[best]);
      if (std::fabs(x) >= max_finite) want = std::copysign(float(max_finite), x);
      if (got != want && bad++ < 5) ADD_FAILURE() << dtype_name(ft.t) << " x " << x << ": " << got << " want " << want;
    }
    EXPECT_EQ(bad, 0) << dtype_name(ft.t);
  }
}

TEST(LowBit, PackingIsOnnxs) {
  // onnx.helper.make_tensor's int32_data for INT4 [1,-2,3,-4,5], UINT2
  // [1,2,3,0,1] and FLOAT4E2M1 [1,2,6].
  auto packed = [](DType t, std::vector<int64_t> vals) {
    std::vector<uint8_t> e;
    for (int64_t v : vals) e.push_back(static_cast<uint8_t>(v));
    std::vector<uint8_t> p(packed_low_bit_bytes(t, int64_t(e.size())));
    pack_low_bit(t, e.data(), int64_t(e.size()), p.data());
    std::vector<uint8_t> back(e.size());
    unpack_low_bit(t, p.data(), int64_t(e.size()), back.data());
    EXPECT_EQ(back, e) << dtype_name(t);
    return std::vector<int>(p.begin(), p.end());
  };
  EXPECT_EQ(packed(DType::I4, {1, -2, 3, -4, 5}), (std::vector<int>{225, 195, 5}));
  EXPECT_EQ(packed(DType::U2, {1, 2, 3, 0, 1}), (std::vector<int>{57, 1}));
  EXPECT_EQ(packed(DType::F4E2M1, {2, 4, 7}), (std::vector<int>{66, 7}));
}

TEST(LowBit, TensorProtoReadsPackedDataAndRejectsWrongSizes) {
  onnx::TensorProto p;
  p.set_data_type(22);  // INT4
  p.add_dims(5);
  for (int v : {225, 195, 5}) p.add_int32_data(v);
  Tensor t = tensor_from_proto(p, "", "t");
  EXPECT_EQ(t.dtype(), DType::I4);
  EXPECT_EQ(t.to_int_vector(), (std::vector<int64_t>{1, -2, 3, -4, 5}));
  onnx::TensorProto q = tensor_to_proto(t, "t");  // raw_data, packed
  EXPECT_EQ(q.raw_data(), std::string("\xe1\xc3\x05", 3));
  EXPECT_EQ(tensor_from_proto(q, "", "q").to_int_vector(), t.to_int_vector());

  onnx::TensorProto f8;
  f8.set_data_type(17);  // FLOAT8E4M3FN, one code per int32
  f8.add_dims(3);
  for (int v : {56, 64, 126}) f8.add_int32_data(v);
  Tensor g = tensor_from_proto(f8, "", "f8");
  EXPECT_EQ(g.get_double(0), 1.0);
  EXPECT_EQ(g.get_double(2), 448.0);

  p.mutable_int32_data()->RemoveLast();
  EXPECT_THROW(
      {
        try {
          tensor_from_proto(p, "", "model.onnx: initializer w");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("int32_data holds 2 values but i4[5] needs 3"), std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  q.set_raw_data(std::string("\xe1\xc3", 2));
  EXPECT_THROW(tensor_from_proto(q, "", "q"), Error);
}

TEST(LowBit, TensorCastsAsOnnxCast) {
  Tensor x = Tensor::from<double>(DType::F32, {4}, {464.0, 465.0, -1e9, 0.3});
  Tensor y = x.cast(DType::F8E4M3FN);  // saturating, as Cast's default
  EXPECT_EQ(y.get_double(0), 448.0);
  EXPECT_EQ(y.get_double(1), 448.0);
  EXPECT_EQ(y.get_double(2), -448.0);
  EXPECT_EQ(y.get_double(3), 0.3125);
  Tensor i = Tensor::from<double>(DType::F32, {3}, {9.0, -9.5, 7.9}).cast(DType::I4);
  EXPECT_EQ(i.to_int_vector(), (std::vector<int64_t>{-7, 7, 7}));
}

}  // namespace
}  // namespace kiln
