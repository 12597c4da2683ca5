// The training-domain optimizers (frontend/adapters_training.cpp) and
// BatchNormalization with training_mode=1 (frontend/adapters_normalization.cpp),
// decomposed at import into kiln ops, against the ONNX formulas evaluated
// here in double: Adagrad, Momentum (standard, nesterov) and Adam at T = 0
// (no bias correction, beta taken as 1) and T > 0 from one graph each (T is a
// runtime input); batch statistics and running statistics; Gradient refused
// by name.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"

namespace kiln {
namespace {

constexpr const char* kTraining = "ai.onnx.preview.training";

onnx::ModelProto training_model(const std::string& op, const std::vector<std::string>& ins,
                                const std::vector<std::string>& outs) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  auto* d = m.add_opset_import();
  d->set_domain(kTraining);
  d->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_domain(kTraining);
  n->set_name(op);
  for (const auto& i : ins) {
    n->add_input(i);
    auto* vi = g->add_input();
    vi->set_name(i);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(i == "T" ? onnx::TensorProto::INT64 : onnx::TensorProto::FLOAT);
    tt->mutable_shape();
    if (i != "R" && i != "T") tt->mutable_shape()->add_dim()->set_dim_value(2);
  }
  for (const auto& o : outs) {
    n->add_output(o);
    g->add_output()->set_name(o);
  }
  return m;
}

void set_float(onnx::ModelProto& m, const char* name, float v) {
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

std::vector<Tensor> run(const onnx::ModelProto& m, std::map<std::string, Tensor> feed) {
  ImportResult r = import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx");
  return ReferenceExecutor(*r.graph).run(feed);
}

Tensor vec(double a, double b) { return Tensor::from<double>(DType::F32, {2}, std::vector<double>{a, b}); }

// Adam, then its X_new for one element by the ONNX formula.
TEST(FrontendTraining, AdamWithAndWithoutBiasCorrection) {
  onnx::ModelProto m = training_model("Adam", {"R", "T", "X", "G", "V", "H"}, {"X_new", "V_new", "H_new"});
  const double alpha = 0.9, beta = 0.8, eps = 0.01, norm = 0.001;
  set_float(m, "alpha", alpha);
  set_float(m, "beta", beta);
  set_float(m, "epsilon", eps);
  set_float(m, "norm_coefficient", norm);
  for (int64_t t : {0, 3}) {
    std::vector<Tensor> out = run(m, {{"R", Tensor::scalar(DType::F32, 0.1)},
                                      {"T", Tensor::scalar(DType::I64, double(t))},
                                      {"X", vec(1.0, -2.0)},
                                      {"G", vec(0.5, 0.25)},
                                      {"V", vec(0.1, 0.2)},
                                      {"H", vec(0.3, 0.4)}});
    ASSERT_EQ(out.size(), 3u);
    const double x = -2.0, g = 0.25 + norm * x;
    const double v = alpha * 0.2 + (1 - alpha) * g, h = beta * 0.4 + (1 - beta) * g * g;
    const double r = t > 0 ? 0.1 * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : 0.1;
    EXPECT_NEAR(out[0].get_double(1), x - r * v / (std::sqrt(h) + eps), 1e-6) << "T = " << t;
    EXPECT_NEAR(out[1].get_double(1), v, 1e-7);
    EXPECT_NEAR(out[2].get_double(1), h, 1e-7);
  }
}

TEST(FrontendTraining, MomentumStandardAndNesterov) {
  const double alpha = 0.9, beta = 0.5, norm = 0.01;
  for (const char* mode : {"standard", "nesterov"}) {
    onnx::ModelProto m = training_model("Momentum", {"R", "T", "X", "G", "V"}, {"X_new", "V_new"});
    set_float(m, "alpha", alpha);
    set_float(m, "beta", beta);
    set_float(m, "norm_coefficient", norm);
    auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
    a->set_name("mode");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(mode);
    for (int64_t t : {0, 1}) {
      std::vector<Tensor> out = run(m, {{"R", Tensor::scalar(DType::F32, 0.1)},
                                        {"T", Tensor::scalar(DType::I64, double(t))},
                                        {"X", vec(1.0, 2.0)},
                                        {"G", vec(-1.0, 3.0)},
                                        {"V", vec(0.5, 0.5)}});
      const double x = 2.0, g = 3.0 + norm * x, b = t > 0 ? beta : 1.0;
      const double v = alpha * 0.5 + b * g;
      const double step = std::string(mode) == "standard" ? v : g + alpha * v;
      EXPECT_NEAR(out[0].get_double(1), x - 0.1 * step, 1e-6) << mode << " T = " << t;
      EXPECT_NEAR(out[1].get_double(1), v, 1e-6) << mode << " T = " << t;
    }
  }
}

TEST(FrontendTraining, AdagradDecaysTheRate) {
  onnx::ModelProto m = training_model("Adagrad", {"R", "T", "X", "G", "H"}, {"X_new", "H_new"});
  set_float(m, "decay_factor", 0.1f);
  set_float(m, "epsilon", 1e-5f);
  std::vector<Tensor> out = run(m, {{"R", Tensor::scalar(DType::F32, 0.1)},
                                    {"T", Tensor::scalar(DType::I64, 4)},
                                    {"X", vec(1.0, 2.0)},
                                    {"G", vec(-1.0, 3.0)},
                                    {"H", vec(2.0, 1.0)}});
  const double r = 0.1 / (1 + 4 * 0.1), h = 1.0 + 9.0;
  EXPECT_NEAR(out[0].get_double(1), 2.0 - r * 3.0 / (std::sqrt(h) + 1e-5), 1e-6);
  EXPECT_NEAR(out[1].get_double(1), h, 1e-6);
}

TEST(FrontendTraining, GradientIsRefusedByName) {
  onnx::ModelProto m = training_model("Gradient", {"X"}, {"dX"});
  try {
    run(m, {});
    ADD_FAILURE() << "Gradient was imported";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("op Gradient of domain 'ai.onnx.preview.training' is not supported"),
              std::string::npos)
        << e.what();
  }
}

// X [2, 2, 1, 2]: per channel mean and population variance over N and the
// spatial dims; the running statistics move by 1 - momentum toward them.
TEST(FrontendTraining, BatchNormalizationTrainingMode) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(15);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type("BatchNormalization");
  n->set_name("bn");
  for (const char* i : {"x", "s", "b", "mean", "var"}) {
    n->add_input(i);
    auto* vi = g->add_input();
    vi->set_name(i);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : std::string(i) == "x" ? std::vector<int64_t>{2, 2, 1, 2} : std::vector<int64_t>{2})
      tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  for (const char* o : {"y", "running_mean", "running_var"}) {
    n->add_output(o);
    g->add_output()->set_name(o);
  }
  auto* a = n->add_attribute();
  a->set_name("training_mode");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  a = n->add_attribute();
  a->set_name("momentum");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(0.75f);
  // Channel 1 holds 3, 5 (batch 0) and 7, 9 (batch 1): mean 6, variance 5.
  Tensor x = Tensor::from<double>(DType::F32, {2, 2, 1, 2}, std::vector<double>{1, 2, 3, 5, 0, 1, 7, 9});
  std::vector<Tensor> out =
      run(m, {{"x", x}, {"s", vec(1.0, 2.0)}, {"b", vec(0.0, 0.5)}, {"mean", vec(0.0, 2.0)}, {"var", vec(1.0, 1.0)}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_NEAR(out[0].get_double(7), (9 - 6) / std::sqrt(5 + 1e-5) * 2 + 0.5, 1e-5);
  EXPECT_NEAR(out[1].get_double(1), 2 * 0.75 + 6 * 0.25, 1e-6);
  EXPECT_NEAR(out[2].get_double(1), 1 * 0.75 + 5 * 0.25, 1e-6);
}

}  // namespace
}  // namespace kiln
