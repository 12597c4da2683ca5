// The pass manager's guarantees to callers: graph outputs keep their names
// through every pass (the default pipeline for a GPU target with layout and
// precision included), a pass that renames one is reported, and errors raised
// inside passes name the model file. Also short_name, which every message
// printing a model's names uses (Node::describe included).
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/short_name.h"
#include "passes/pass_manager.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

std::vector<std::string> output_names(const Graph& g) {
  std::vector<std::string> r;
  for (const Value* v : g.outputs()) r.push_back(v->name());
  return r;
}

// A conv whose result is returned (the layout pass puts a transpose back to
// NCHW in the output's slot) and a second output after a pointwise op.
const char* kConvModel = R"(graph @m(%x: f32[1,4,8,8]) -> (f32[1,8,8,8], f32[1,8,8,8]) {
  %w = const f32[8,4,3,3] splat<0.125>
  %b = const f32[8] splat<0.5>
  %conv_out = conv(%x, %w, %b) {dilations=[1,1], pads=[1,1,1,1], strides=[1,1]} : f32[1,8,8,8] loc("conv1")
  %act = relu(%conv_out) : f32[1,8,8,8] loc("relu1")
  return %conv_out, %act
}
)";

class OutputNames : public ::testing::TestWithParam<std::string> {};

TEST_P(OutputNames, DefaultPipelineKeepsThem) {
  auto g = testing::parse(kConvModel);
  const std::vector<std::string> want = output_names(*g);
  PassOptions opts;
  opts.target = "sm_90";
  opts.precision = GetParam();
  PassManager pm;
  for (const std::string& p : default_pipeline(opts)) pm.add(p);
  PipelineOptions po;
  po.verify_each = false;  // the names are compared here, not by the manager's own check
  pm.run(*g, opts, po);
  EXPECT_EQ(output_names(*g), want);
}

INSTANTIATE_TEST_SUITE_P(Precisions, OutputNames, ::testing::Values("fp32", "fp16", "bf16", "tf32"));

// A pass that gives the first output another name: the bug the manager catches.
class RenamesOutput : public Pass {
 public:
  std::string_view name() const override { return "renames-output"; }
  bool run(Graph& g, const PassOptions&, PassStats&) override {
    g.outputs()[0]->set_name("renamed");
    return true;
  }
};

TEST(PassManager, RejectsAPassThatRenamesAnOutput) {
  auto g = testing::parse(kConvModel);
  PassManager pm;
  pm.add(std::make_unique<RenamesOutput>());
  PipelineOptions po;
  po.source = "model.onnx";
  try {
    pm.run(*g, {}, po);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "model.onnx: after pass 'renames-output': graph output 0 is named %renamed, it was %conv_out: "
                 "passes must keep output names");
  }
}

// fold-constants evaluates a Gather of constants; its index error names the
// model file and the node.
TEST(PassManager, PassErrorsNameTheModel) {
  auto g = testing::parse(R"(graph @m() -> (f32[2,2]) {
  %data = const f32[3,2] splat<1.0>
  %i = const i64[2] dense<[0, 7]>
  %y = gather(%data, %i) {axis=0} : f32[2,2] loc("gather")
  return %y
}
)");
  PassManager pm;
  pm.add("fold-constants");
  PipelineOptions po;
  po.source = "dir/model.onnx";
  try {
    pm.run(*g, {}, po);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("dir/model.onnx: node \"gather\" (gather): ", 0), 0u) << e.what();
  }
}

// A pass that changes the graph validly but reports no change; and one that
// changes nothing.
class ChangesSilently : public Pass {
 public:
  std::string_view name() const override { return "changes-silently"; }
  bool run(Graph& g, const PassOptions&, PassStats&) override {
    g.node_list()[0]->set_name("renamed_node");
    return false;
  }
};
class ChangesNothing : public Pass {
 public:
  std::string_view name() const override { return "changes-nothing"; }
  bool run(Graph&, const PassOptions&, PassStats&) override { return false; }
};

// The verifier's full strength (what every test runs, KILN_VERIFY_EACH=all):
// a pass that reports no change must not have changed the graph, since a
// user's compile skips the verifier after it.
TEST(PassManager, HoldsAPassThatReportsNoChangeToIt) {
  auto g = testing::parse(kConvModel);
  PassManager pm;
  pm.add(std::make_unique<ChangesNothing>());
  pm.add(std::make_unique<ChangesSilently>());
  PipelineOptions po;
  po.verify_unchanged = true;
  po.source = "model.onnx";
  try {
    pm.run(*g, {}, po);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "model.onnx: pass 'changes-silently' reported no change but changed the graph (the verifier is "
                 "skipped after such passes: a pass must report every change)");
  }
}

// A user's compile: the verifier after the first pass (it also checks the
// graph the pipeline was given) and after each pass that changed something.
TEST(PassManager, SkipsTheVerifierAfterPassesThatChangedNothing) {
  auto g = testing::parse(kConvModel);
  PassManager pm;
  pm.add(std::make_unique<ChangesNothing>());
  pm.add(std::make_unique<ChangesNothing>());
  pm.add("fuse");
  pm.add(std::make_unique<ChangesNothing>());
  PipelineOptions po;
  po.verify_unchanged = false;
  std::vector<PassRecord> recs = pm.run(*g, {}, po);
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_TRUE(recs[0].verified);
  EXPECT_FALSE(recs[1].verified);
  EXPECT_TRUE(recs[2].changed);
  EXPECT_TRUE(recs[2].verified);
  EXPECT_FALSE(recs[3].verified);
  // Full strength: after every pass.
  auto g2 = testing::parse(kConvModel);
  po.verify_unchanged = true;
  for (const PassRecord& r : pm.run(*g2, {}, po)) EXPECT_TRUE(r.verified) << r.name;
}

// Node::describe, which messages about nodes use, shortens a 1 MB name.
TEST(ShortName, NodeDescriptionsAreShort) {
  auto g = testing::parse(R"(graph @m(%x: f32[2]) -> (f32[2]) {
  %y = relu(%x) : f32[2]
  return %y
}
)");
  Node* n = g->node_list()[0];
  n->set_name(std::string(1 << 20, 'n'));
  EXPECT_EQ(n->describe(), "node \"" + std::string(60, 'n') + "..." + std::string(60, 'n') + "\" (relu)");
}

TEST(ShortName, KeepsShortNamesAndCutsLongOnes) {
  EXPECT_EQ(short_name("conv1"), "conv1");
  std::string edge(123, 'a');
  EXPECT_EQ(short_name(edge), edge);
  std::string big = std::string(60, 'h') + std::string(1 << 20, 'm') + std::string(60, 't');
  EXPECT_EQ(short_name(big), std::string(60, 'h') + "..." + std::string(60, 't'));
  // A two-byte character across the cut is kept whole or dropped, never split.
  std::string utf8 = std::string(59, 'a') + "\xc3\xa9" + std::string(200, 'b');
  EXPECT_EQ(short_name(utf8).substr(0, 62), std::string(59, 'a') + "...");
}

}  // namespace
}  // namespace kiln
