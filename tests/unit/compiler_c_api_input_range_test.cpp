// kiln_compile_options_set_input_range (the builder API, kiln/kiln_compiler.h)
// refuses what cannot be a shape profile, each message naming the input: a
// range for a name the model has no input of, min > opt or opt > max, and a
// rank other than the input's. Each message names the call its caller made
// (kiln_compile_options_set_input_range, or kiln::Compiler::input_range
// through the C++ wrapper), not kiln compile's flags. A well-formed range
// compiles a plan with that profile. Linked against libkiln_compiler.so, as
// an embedding application is.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>

#include "kiln/kiln_compiler.h"
#include "kiln/kiln_compiler.hpp"

namespace {

// y = relu(x), x: f32[N, 4] with N symbolic.
std::string relu_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("relu");
  for (const char* name : {"x", "y"}) {
    auto* v = std::string(name) == "x" ? g->add_input() : g->add_output();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("N");
    t->mutable_shape()->add_dim()->set_dim_value(4);
  }
  auto* n = g->add_node();
  n->set_op_type("Relu");
  n->add_input("x");
  n->add_output("y");
  return m.SerializeAsString();
}

class CompileInputRange : public ::testing::Test {
 protected:
  void SetUp() override {
    options = kiln_compile_options_create();
    ASSERT_NE(options, nullptr);
    ASSERT_EQ(kiln_compile_options_set_target(options, "cpu"), KILN_COMPILE_OK) << kiln_compile_last_error();
  }
  void TearDown() override {
    kiln_plan_bytes_free(plan);
    kiln_compile_options_destroy(options);
  }
  kiln_compile_status compile() {
    const std::string model = relu_model();
    kiln_plan_bytes_free(plan);
    plan = nullptr;
    return kiln_compile_memory(model.data(), model.size(), "relu.onnx", options, &plan, &size);
  }
  kiln_compile_options* options = nullptr;
  uint8_t* plan = nullptr;
  size_t size = 0;
};

TEST_F(CompileInputRange, AWellFormedRangeCompiles) {
  const int64_t lo[] = {1, 4}, hi[] = {8, 4};
  ASSERT_EQ(kiln_compile_options_set_input_range(options, "x", lo, nullptr, hi, 2), KILN_COMPILE_OK);
  EXPECT_EQ(compile(), KILN_COMPILE_OK) << kiln_compile_last_error();
  EXPECT_GT(size, 0u);
}

TEST_F(CompileInputRange, RefusesAnUnknownInputNamingIt) {
  const int64_t lo[] = {1, 4}, hi[] = {8, 4};
  ASSERT_EQ(kiln_compile_options_set_input_range(options, "x", lo, nullptr, hi, 2), KILN_COMPILE_OK);
  ASSERT_EQ(kiln_compile_options_set_input_range(options, "tokens", lo, nullptr, hi, 2), KILN_COMPILE_OK);
  EXPECT_EQ(compile(), KILN_COMPILE_MODEL_ERROR);
  EXPECT_STREQ(kiln_compile_last_error(),
               "relu.onnx: kiln_compile_options_set_input_range's min names \"tokens\", which is not an input of the "
               "model (its inputs: \"x\")");
  EXPECT_EQ(plan, nullptr);
}

// Refused when set, before any compile; a refused range is not kept.
TEST_F(CompileInputRange, RefusesMinAboveOptOrOptAboveMaxNamingTheInput) {
  const int64_t one[] = {1, 4}, four[] = {4, 4}, eight[] = {8, 4}, nine[] = {9, 4}, neg[] = {-1, 4};
  EXPECT_EQ(kiln_compile_options_set_input_range(options, "x", nine, nullptr, eight, 2), KILN_COMPILE_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_compile_last_error(),
               "input range of \"x\": dim 0 needs 0 <= min <= opt <= max, got min 9, opt 8, max 8");
  EXPECT_EQ(kiln_compile_options_set_input_range(options, "x", eight, four, eight, 2), KILN_COMPILE_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_compile_last_error(),
               "input range of \"x\": dim 0 needs 0 <= min <= opt <= max, got min 8, opt 4, max 8");
  EXPECT_EQ(kiln_compile_options_set_input_range(options, "x", one, nine, eight, 2), KILN_COMPILE_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_compile_last_error(),
               "input range of \"x\": dim 0 needs 0 <= min <= opt <= max, got min 1, opt 9, max 8");
  EXPECT_EQ(kiln_compile_options_set_input_range(options, "x", neg, nullptr, eight, 2), KILN_COMPILE_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_compile_last_error(),
               "input range of \"x\": dim 0 needs 0 <= min <= opt <= max, got min -1, opt 8, max 8");
  EXPECT_EQ(kiln_compile_options_set_input_range(options, "x", nullptr, nullptr, eight, 2),
            KILN_COMPILE_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_compile_last_error(), "input range: null argument");
  // None of them was kept: the compile finds "x" without a range.
  EXPECT_EQ(compile(), KILN_COMPILE_MODEL_ERROR);
  EXPECT_STREQ(kiln_compile_last_error(),
               "relu.onnx: input \"x\": dimension 0 (\"N\") is not fixed; set it with "
               "kiln_compile_options_set_input_shape for \"x\", or give its range with "
               "kiln_compile_options_set_input_range");
}

TEST_F(CompileInputRange, RefusesAnotherRankNamingTheInput) {
  const int64_t lo[] = {1, 4, 1}, hi[] = {8, 4, 1};
  ASSERT_EQ(kiln_compile_options_set_input_range(options, "x", lo, nullptr, hi, 3), KILN_COMPILE_OK);
  EXPECT_EQ(compile(), KILN_COMPILE_MODEL_ERROR);
  EXPECT_STREQ(kiln_compile_last_error(),
               "relu.onnx: input \"x\": kiln_compile_options_set_input_range's min gives rank 3 but the model "
               "declares rank 2");
  EXPECT_EQ(plan, nullptr);
}

// The C++ wrapper's messages name its own methods.
TEST(CompileInputRangeCpp, MessagesNameTheWrappersMethods) {
  const std::string model = relu_model();
  try {
    kiln::Compiler()
        .target("cpu")
        .input_range("tokens", {1, 4}, {8, 4})
        .input_range("x", {1, 4}, {8, 4})
        .compile_memory(model.data(), model.size(), "relu.onnx");
    FAIL() << "an input range for \"tokens\" compiled";
  } catch (const kiln::compile_error& e) {
    EXPECT_STREQ(e.what(),
                 "relu.onnx: kiln::Compiler::input_range's min names \"tokens\", which is not an input of the model "
                 "(its inputs: \"x\")");
  }
  try {
    kiln::Compiler().target("cpu").compile_memory(model.data(), model.size(), "relu.onnx");
    FAIL() << "a model with an open dim compiled without a shape or range";
  } catch (const kiln::compile_error& e) {
    EXPECT_STREQ(e.what(),
                 "relu.onnx: input \"x\": dimension 0 (\"N\") is not fixed; set it with "
                 "kiln::Compiler::input_shape(\"x\", dims), or give its range with kiln::Compiler::input_range");
  }
}

TEST_F(CompileInputRange, ApiNamesTakesCOrCpp) {
  EXPECT_EQ(kiln_compile_options_set_api_names(options, "rust"), KILN_COMPILE_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_compile_last_error(), "api names: \"rust\" is neither \"c\" nor \"c++\"");
}

}  // namespace
