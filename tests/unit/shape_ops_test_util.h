// Helpers of the shape-op tests (shape_ops_test.cpp, shape_ops_onnx_test.cpp):
// infer / evaluate one kiln op on given operand types / tensors.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "backends/reference/executor.h"
#include "ir/error.h"
#include "ops/registry.h"

namespace kiln::testing::shape_ops {

inline std::vector<TensorType> infer(const std::string& op, const std::vector<TensorType>& ins, const AttrMap& a,
                                     int nout = 1, const std::vector<Tensor>& known = {}) {
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

inline std::vector<Tensor> run_n(const std::string& op, const std::vector<Tensor>& ins, const AttrMap& a, int nout) {
  std::vector<TensorType> types;
  for (const Tensor& t : ins) types.push_back(t.type());
  std::vector<TensorType> out = infer(op, types, a, nout, ins);
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ins) ptrs.push_back(&t);
  return evaluate_op(op_registry().get(op), a, ptrs, out, "test");
}

inline Tensor run(const std::string& op, const std::vector<Tensor>& ins, const AttrMap& a) {
  return run_n(op, ins, a, 1)[0];
}

inline Tensor iota(DType dt, Shape s) {
  Tensor t(dt, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, static_cast<double>(i));
  return t;
}

inline Tensor ints(DType dt, Shape s, std::vector<double> v) { return Tensor::from(dt, std::move(s), v); }

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_double(i));
  return r;
}

inline AttrMap attrs(std::initializer_list<std::pair<const char*, Attribute>> kv) {
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
}  // namespace kiln::testing::shape_ops
