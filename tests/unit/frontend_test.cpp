// Frontend details the conformance suites do not reach: every tensor storage
// form, external-data path safety, input shapes, and the errors' wording.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "frontend/import_context.h"
#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "tests/unit/error_of.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A model computing y = x + w (w an initializer), x of the given dims
// (negative dims are left symbolic).
onnx::ModelProto add_model(std::vector<int64_t> dims, const std::string& op = "Add") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (d >= 0) dim->set_dim_value(d);
    else dim->set_dim_param("batch");
  }
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(1);
  w->add_float_data(2.0f);
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("the_node");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

ImportResult import_model(const onnx::ModelProto& m, const ImportOptions& o = {}, const std::string& dir = ".") {
  return import_onnx_bytes(m.SerializeAsString(), dir, "model.onnx", o);
}

using testing::error_of;

TEST(Frontend, ImportsSimpleModel) {
  ImportResult r = import_model(add_model({2, 3}));
  ASSERT_EQ(r.graph->inputs().size(), 1u);
  EXPECT_EQ(r.graph->outputs()[0]->type().str(), "f32[2,3]");
  EXPECT_EQ(r.graph->outputs()[0]->name(), "y");
  EXPECT_EQ(r.opset, 17);
}

// A node the import folds to a constant (Shape of a static input) that is
// also a graph output keeps the model's output name; it was "my_shape.1".
TEST(Frontend, FoldedGraphOutputKeepsItsOnnxName) {
  onnx::ModelProto m = add_model({2, 3});
  auto* g = m.mutable_graph();
  auto* n = g->add_node();
  n->set_op_type("Shape");
  n->add_input("x");
  n->add_output("my_shape");
  g->add_output()->set_name("my_shape");
  ImportResult r = import_model(m);
  ASSERT_EQ(r.graph->outputs().size(), 2u);
  EXPECT_EQ(r.graph->outputs()[0]->name(), "y");
  EXPECT_TRUE(r.graph->outputs()[1]->is_constant());
  EXPECT_EQ(r.graph->outputs()[1]->name(), "my_shape");
}

TEST(Frontend, SymbolicDimNeedsShapes) {
  std::string e = error_of([] { import_model(add_model({-1, 3})); });
  EXPECT_NE(e.find("input \"x\""), std::string::npos) << e;
  EXPECT_NE(e.find("\"batch\""), std::string::npos) << e;
  EXPECT_NE(e.find("--shapes"), std::string::npos) << e;
  ImportOptions o;
  o.input_shapes = parse_shapes_flag("x:4x3");
  EXPECT_EQ(import_model(add_model({-1, 3}), o).graph->inputs()[0]->type().str(), "f32[4,3]");
}

TEST(Frontend, ShapesFlagMustAgreeWithFixedDims) {
  ImportOptions o;
  o.input_shapes = parse_shapes_flag("x:5x3");
  std::string e = error_of([&] { import_model(add_model({2, 3}), o); });
  EXPECT_NE(e.find("fixes it at 2"), std::string::npos) << e;
}

TEST(Frontend, ParseShapesFlag) {
  auto s = parse_shapes_flag("input.1:1x3x224x224,mask:1x128");
  EXPECT_EQ(s["input.1"], (Shape{1, 3, 224, 224}));
  EXPECT_EQ(s["mask"], (Shape{1, 128}));
  EXPECT_THROW(parse_shapes_flag("x:1xax3"), Error);
  EXPECT_THROW(parse_shapes_flag("x1x3"), Error);
  EXPECT_THROW(parse_shapes_flag("x:1x-3"), Error);
  // A dimension left out at either end, and an input named twice (the last
  // shape used to win silently).
  EXPECT_THROW(parse_shapes_flag("x:1x3x"), Error);
  EXPECT_THROW(parse_shapes_flag("x:x1x3"), Error);
  EXPECT_THROW(parse_shapes_flag("x:1x3,x:4x3"), Error);
}

TEST(Frontend, UnknownOpIsUnsupportedAndNamed) {
  try {
    import_model(add_model({2}, "FancyOp"));
    FAIL() << "no error";
  } catch (const Unsupported& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("model.onnx: node \"the_node\" (FancyOp)"), std::string::npos) << m;
  }
}

TEST(Frontend, UndefinedOperandIsAnError) {
  onnx::ModelProto m = add_model({2});
  m.mutable_graph()->mutable_node(0)->set_input(1, "nope");
  std::string e = error_of([&] { import_model(m); });
  EXPECT_NE(e.find("\"nope\" is not defined"), std::string::npos) << e;
}

TEST(Frontend, OtherDomainsAreUnsupported) {
  onnx::ModelProto m = add_model({2});
  m.mutable_graph()->mutable_node(0)->set_domain("com.microsoft");
  EXPECT_THROW(import_model(m), Unsupported);
}

TEST(Frontend, RejectsIrVersionAndOpsetOutOfRange) {
  onnx::ModelProto m = add_model({2});
  m.set_ir_version(2);
  EXPECT_THROW(import_model(m), Unsupported);
  m.set_ir_version(8);
  m.mutable_opset_import(0)->set_version(99);
  EXPECT_THROW(import_model(m), Unsupported);
}

TEST(Frontend, GarbageBytesAreAnError) {
  std::string e = error_of([] { import_onnx_bytes("\x08\x96\x01garbage\xff\xff", ".", "bad.onnx"); });
  EXPECT_NE(e.find("bad.onnx"), std::string::npos) << e;
}

TEST(Frontend, OutputDeclaredWithWrongDtypeIsAnError) {
  onnx::ModelProto m = add_model({2});
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  std::string e = error_of([&] { import_model(m); });
  EXPECT_NE(e.find("output \"y\""), std::string::npos) << e;
}

TEST(TensorProto, EveryStorageForm) {
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::FLOAT16);
  p.add_dims(2);
  p.add_int32_data(0x3c00);  // 1.0
  p.add_int32_data(0xc000);  // -2.0
  Tensor t = tensor_from_proto(p, "", "t");
  EXPECT_EQ(t.get_double(0), 1.0);
  EXPECT_EQ(t.get_double(1), -2.0);

  onnx::TensorProto q;
  q.set_data_type(onnx::TensorProto::INT64);
  q.add_dims(3);
  for (int64_t v : {5, -6, 7}) q.add_int64_data(v);
  EXPECT_EQ(tensor_from_proto(q, "", "q").to_int_vector(), (std::vector<int64_t>{5, -6, 7}));

  onnx::TensorProto r;
  r.set_data_type(onnx::TensorProto::BOOL);
  r.add_dims(2);
  r.add_int32_data(1);
  r.add_int32_data(0);
  EXPECT_EQ(tensor_from_proto(r, "", "r").to_int_vector(), (std::vector<int64_t>{1, 0}));

  onnx::TensorProto s;
  s.set_data_type(onnx::TensorProto::UINT64);
  s.add_dims(1);
  s.add_uint64_data(42);
  EXPECT_EQ(tensor_from_proto(s, "", "s").get_int(0), 42);

  onnx::TensorProto d;
  d.set_data_type(onnx::TensorProto::DOUBLE);
  d.add_double_data(0.25);
  EXPECT_EQ(tensor_from_proto(d, "", "d").get_double(0), 0.25);  // scalar: no dims

  float raw[2] = {1.5f, -0.5f};
  onnx::TensorProto w;
  w.set_data_type(onnx::TensorProto::FLOAT);
  w.add_dims(2);
  w.set_raw_data(std::string(reinterpret_cast<char*>(raw), sizeof raw));
  Tensor wt = tensor_from_proto(w, "", "w");
  EXPECT_EQ(wt.get_double(1), -0.5);
}

TEST(TensorProto, SizeMismatchesAreErrors) {
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(3);
  p.add_float_data(1);
  EXPECT_THROW(tensor_from_proto(p, "", "p"), Error);
  p.clear_float_data();
  p.set_raw_data("abc");
  EXPECT_THROW(tensor_from_proto(p, "", "p"), Error);
  onnx::TensorProto n;
  n.set_data_type(onnx::TensorProto::FLOAT);
  n.add_dims(-1);
  EXPECT_THROW(tensor_from_proto(n, "", "n"), Error);
  onnx::TensorProto huge;
  huge.set_data_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 4; ++i) huge.add_dims(int64_t(1) << 20);
  EXPECT_THROW(tensor_from_proto(huge, "", "huge"), Error);
  // A string tensor holds one string_data entry per element: a scalar with
  // none, or two elements with one, is an error, not padding.
  onnx::TensorProto str;
  str.set_data_type(onnx::TensorProto::STRING);
  EXPECT_THROW(tensor_from_proto(str, "", "str"), Error);
  str.add_dims(2);
  str.add_string_data("a");
  EXPECT_THROW(tensor_from_proto(str, "", "str"), Error);
}

class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_ext_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "model");
    std::ofstream(dir_ / "model" / "w.bin", std::ios::binary).write("\0\0\x80?\0\0\0@", 8);  // 1.0f, 2.0f
    std::ofstream(dir_ / "secret.bin", std::ios::binary).write("\0\0\x80?\0\0\0@", 8);
  }
  void TearDown() override { fs::remove_all(dir_); }

  onnx::TensorProto ext(const std::string& location, int64_t offset = 0, int64_t n = 2) {
    onnx::TensorProto p;
    p.set_data_type(onnx::TensorProto::FLOAT);
    p.add_dims(n);
    p.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = p.add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    if (offset) {
      kv = p.add_external_data();
      kv->set_key("offset");
      kv->set_value(std::to_string(offset));
    }
    return p;
  }
  std::string model_dir() const { return (dir_ / "model").string(); }
  fs::path dir_;
};

TEST_F(ExternalData, ReadsInsideModelFolder) {
  Tensor t = tensor_from_proto(ext("w.bin"), model_dir(), "w");
  EXPECT_EQ(t.get_double(0), 1.0);
  EXPECT_EQ(t.get_double(1), 2.0);
  EXPECT_EQ(tensor_from_proto(ext("w.bin", 4, 1), model_dir(), "w").get_double(0), 2.0);
}

TEST_F(ExternalData, RejectsEscapes) {
  std::string abs = (dir_ / "secret.bin").string();
  EXPECT_NE(error_of([&] { tensor_from_proto(ext(abs), model_dir(), "w"); }).find("absolute"), std::string::npos);
  EXPECT_NE(error_of([&] { tensor_from_proto(ext("../secret.bin"), model_dir(), "w"); }).find("leaves"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tensor_from_proto(ext("a/../../secret.bin"), model_dir(), "w"); }).find("leaves"),
            std::string::npos);
  fs::create_symlink(dir_ / "secret.bin", dir_ / "model" / "link.bin");
  EXPECT_NE(error_of([&] { tensor_from_proto(ext("link.bin"), model_dir(), "w"); }).find("symbolic link"),
            std::string::npos);
  fs::create_directory(dir_ / "model" / "sub");
  EXPECT_NE(error_of([&] { tensor_from_proto(ext("sub"), model_dir(), "w"); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tensor_from_proto(ext("missing.bin"), model_dir(), "w"); }).find("does not exist"),
            std::string::npos);
}

TEST_F(ExternalData, RejectsRangesOutsideTheFile) {
  EXPECT_NE(error_of([&] { tensor_from_proto(ext("w.bin", 4, 2), model_dir(), "w"); }).find("outside"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tensor_from_proto(ext("w.bin", 0, 3), model_dir(), "w"); }).find("outside"),
            std::string::npos);
  onnx::TensorProto p = ext("w.bin");
  auto* kv = p.add_external_data();
  kv->set_key("offset");
  kv->set_value("-4");
  EXPECT_NE(error_of([&] { tensor_from_proto(p, model_dir(), "w"); }).find("negative"), std::string::npos);
  onnx::TensorProto q = ext("w.bin");
  kv = q.add_external_data();
  kv->set_key("length");
  kv->set_value("12x");
  EXPECT_NE(error_of([&] { tensor_from_proto(q, model_dir(), "w"); }).find("not an integer"), std::string::npos);
}

TEST(AdapterNames, DefaultKilnName) {
  EXPECT_EQ(default_kiln_name("BatchNormalization"), "batch_normalization");
  EXPECT_EQ(default_kiln_name("ReduceLogSumExp"), "reduce_log_sum_exp");
  EXPECT_EQ(default_kiln_name("MatMul"), "matmul");
  EXPECT_EQ(default_kiln_name("GlobalAveragePool"), "global_average_pool");
  EXPECT_EQ(default_kiln_name("Relu"), "relu");
  EXPECT_EQ(default_kiln_name("IsNaN"), "isnan");
}

}  // namespace
}  // namespace kiln
