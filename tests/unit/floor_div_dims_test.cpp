// Floor division of symbolic dims (ir/floor_div_dims.h): the output sizes of
// strided windows over a symbolic H or W. Exact divisions stay polynomials,
// others become one derived symbol of the base whose value follows the
// base's binding (eval_dim, the plan's polynomials), chains of strides fold
// into one derived symbol, and what is not expressible is nullopt.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/floor_div_dims.h"
#include "ir/symbolic_dim.h"

namespace kiln {
namespace {

int64_t h() { return symbol_dim("h"); }
int64_t plus(int64_t d, int64_t k) { return value_add(d, k); }

TEST(FloorDivDims, ExactDivisionsStayPolynomials) {
  EXPECT_EQ(dim_floor_div(dim_mul(h(), 4), 2), dim_mul(h(), 2));
  EXPECT_EQ(dim_str(*dim_floor_div(plus(dim_mul(h(), 2), 3), 2)), "h+1");
  EXPECT_EQ(dim_floor_div(h(), 1), h());
  EXPECT_EQ(dim_floor_div(7, 2), 3);
}

TEST(FloorDivDims, OtherDivisionsAreOneDerivedSymbol) {
  EXPECT_EQ(dim_str(*dim_floor_div(h(), 2)), "h.div2");
  EXPECT_EQ(dim_str(*dim_floor_div(plus(h(), -1), 2)), "h.plus1.div2-1");
  EXPECT_EQ(dim_str(*dim_floor_div(plus(dim_mul(h(), 3), 1), 2)), "h+h.plus1.div2");
  EXPECT_EQ(dim_str(*dim_ceil_div(h(), 2)), "h.plus1.div2");
  // floor((floor(h/2) + 1 - 1) / 2) = floor(h / 4); conv k3 p1 s2 after it.
  const int64_t q = *dim_floor_div(h(), 2);
  EXPECT_EQ(dim_str(*dim_floor_div(q, 2)), "h.div4");
  EXPECT_EQ(dim_str(plus(*dim_floor_div(plus(q, -1), 2), 1)), "h.plus2.div4");
  // Not expressible: a sum of symbols, a derived symbol with a coefficient the stride does not divide.
  EXPECT_FALSE(dim_floor_div(dim_add(h(), symbol_dim("w")), 2));
  EXPECT_FALSE(dim_floor_div(dim_mul(q, 3), 2));
}

TEST(FloorDivDims, DerivedValuesFollowTheBase) {
  const int64_t out = plus(*dim_floor_div(plus(h(), -1), 2), 1);  // conv k3 p1 s2 over h
  for (int64_t v = 1; v < 40; ++v) {
    EXPECT_EQ(eval_dim(out, {{"h", v}}), (v - 1) / 2 + 1) << v;
    EXPECT_EQ(eval_dim(*dim_floor_div(dim_mul(h(), 3), 4), {{"h", v}}), 3 * v / 4) << v;
  }
  EXPECT_EQ(dim_symbols(out), std::vector<std::string>{"h"});
  EXPECT_EQ(symbol_value("h.times3.plus1.div4", {{"h", 5}}), 4);
  EXPECT_FALSE(symbol_value("h.div2", {{"w", 5}}));
  EXPECT_EQ(substitute_dim(out, {{"w", 3}}), out);  // left symbolic
}

// A resize's floor(in * scale) for a scale m / 2^k: a polynomial for an
// integer scale, derived symbols otherwise, equal to floor(v * s) at every v.
TEST(FloorDivDims, ScaledSizesAreFloorOfTheProduct) {
  EXPECT_EQ(*dim_floor_scale(h(), 2.0), dim_mul(h(), 2));
  EXPECT_EQ(dim_str(*dim_floor_scale(h(), 1.5)), "h+h.div2");
  EXPECT_EQ(dim_str(*dim_floor_scale(h(), 0.5)), "h.div2");
  EXPECT_EQ(dim_str(*dim_floor_scale(h(), 0.75)), "h.times3.div4");
  EXPECT_EQ(dim_str(*dim_floor_scale(*dim_floor_div(h(), 2), 0.5)), "h.div4");  // a pool then a half
  EXPECT_EQ(*dim_floor_scale(37, 1.5), 55);
  for (float s : {1.5f, 0.75f, 2.5f, 1.25f, 0.3f, 1.0f / 3.0f, 2.0f}) {
    const int64_t d = *dim_floor_scale(h(), static_cast<double>(s));
    for (int64_t v = 1; v < 70; ++v)
      EXPECT_EQ(eval_dim(d, {{"h", v}}), static_cast<int64_t>(std::floor(static_cast<double>(v) * s)))
          << s << " at " << v;
  }
  // Not expressible: 1.5 of floor(h / 2); not a positive finite scale; 2^-40.
  EXPECT_FALSE(dim_floor_scale(*dim_floor_div(h(), 2), 1.5));
  EXPECT_FALSE(dim_floor_scale(h(), 0.0));
  EXPECT_FALSE(dim_floor_scale(h(), std::ldexp(1.0, -40)));
}

TEST(FloorDivDims, NamesParseBackAndPlainNamesAreNotDerived) {
  auto d = parse_derived_symbol("img.h.times3.plus1.div4");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->base, "img.h");
  EXPECT_EQ(d->times, 3);
  EXPECT_EQ(d->plus, 1);
  EXPECT_EQ(d->div, 4);
  EXPECT_EQ(derived_symbol_name(*d), "img.h.times3.plus1.div4");
  for (const char* plain : {"h", "h.div1", "h.div", "h.plus2.div2", "h.times2.div2", ".div2", "h.div02"})
    EXPECT_FALSE(parse_derived_symbol(plain)) << plain;
  EXPECT_EQ(base_symbol("h.plus1.div2"), "h");
  EXPECT_EQ(base_symbol("seq"), "seq");
}

}  // namespace
}  // namespace kiln
