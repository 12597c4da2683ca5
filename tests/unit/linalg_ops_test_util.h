// Helpers of the linalg and misc op tests (linalg_ops_test.cpp,
// misc_ops_test.cpp): infer one kiln op's result types, or run its reference
// kernel on constant operands.
#pragma once
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backends/reference/executor.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/registry.h"

namespace kiln::testing::linalg_ops {

inline std::vector<TensorType> infer(const std::string& op, const std::vector<TensorType>& ins, const AttrMap& a = {},
                                     int nout = 1) {
  Graph g;
  std::vector<Value*> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input(fmt::format("x{}", i), ins[i]));
  InferContext ic(op, vs, a, nout, "test");
  return infer_types(op_registry().get(op), ic);
}

inline Shape infer_shape(const std::string& op, const std::vector<Shape>& shapes, const AttrMap& a = {},
                         DType t = DType::F32) {
  std::vector<TensorType> ins;
  for (const Shape& s : shapes) ins.emplace_back(t, s);
  return infer(op, ins, a)[0].shape;
}

inline std::string infer_error(const std::string& op, const std::vector<TensorType>& ins, const AttrMap& a = {}) {
  try {
    infer(op, ins, a);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Infers with the operands as constants (so data-dependent inference sees
// them), then runs the reference kernel.
inline std::vector<Tensor> run(const std::string& op, const std::vector<Tensor>& ins, const AttrMap& a = {},
                               int nout = 1) {
  Graph g;
  std::vector<Value*> vs;
  // A default-constructed Tensor (rank 0 but no element) stands for an absent operand.
  auto absent = [](const Tensor& t) { return t.rank() == 0 && t.numel() == 0; };
  for (size_t i = 0; i < ins.size(); ++i)
    vs.push_back(absent(ins[i]) ? nullptr : g.add_constant(fmt::format("c{}", i), ins[i]));
  InferContext ic(op, vs, a, nout, "test");
  std::vector<TensorType> outs = infer_types(op_registry().get(op), ic);
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ins) ptrs.push_back(absent(t) ? nullptr : &t);
  return evaluate_op(op_registry().get(op), a, ptrs, outs, "test");
}

inline Tensor random_tensor(DType t, Shape s, int seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  Tensor r(t, std::move(s));
  for (int64_t i = 0; i < r.numel(); ++i) {
    double v = d(rng);
    r.set_double(i, is_float(t) ? v : std::round(v));
  }
  return r;
}

inline void expect_near(const Tensor& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < got.numel(); ++i) EXPECT_NEAR(got.get_double(i), want[i], tol) << "element " << i;
}

}  // namespace kiln::testing::linalg_ops
