// lstm and gru over a symbolic sequence and batch (ops/rnn_ops.cpp): a frame
// tagger exported with a dynamic batch and number of frames (the dynamic zoo
// tier's lstm_gru_tagger) imports with [seq, dirs, batch, hidden] results,
// runs from one CPU plan with a shape profile at several shapes equal to the
// reference backend on the graph specialised to each, and a GPU plan with
// the profile is refused naming the node (the recurrent kernels are not
// shape-generic yet).
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ir/verifier.h"
#include "kiln/kiln.hpp"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

// A unidirectional LSTM, then a bidirectional GRU over its frames.
const char* kTagger =
    "graph @tagger(%x: f32[s,b,4], %w: f32[1,24,4], %r: f32[1,24,6], %gw: f32[2,18,6], %gr: f32[2,18,6]) -> "
    "(f32[s,1,b,6], f32[1,b,6], f32[s,2,b,6]) symbols(s in [1, 8], b in [1, 3]) {\n"
    "  %y, %yh = lstm(%x, %w, %r) {hidden_size=6} : f32[s,1,b,6], f32[1,b,6]\n"
    "  %f = reshape(%y) {shape=[s,b,6]} : f32[s,b,6]\n"
    "  %gy, %gh = gru(%f, %gw, %gr) {hidden_size=6, direction=\"bidirectional\"} : f32[s,2,b,6], f32[2,b,6]\n"
    "  return %y, %yh, %gy\n"
    "}\n";

// Only the input with symbolic dims has a profile entry.
plan::Profile profile() { return {{{"x", {1, 1, 4}, {4, 2, 4}, {8, 3, 4}}}}; }

std::vector<int64_t> dims(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

TEST(RnnSymbolicDims, ATaggerOverAnyBatchAndFrameCountRunsFromOneCpuPlanAndAGpuPlanIsRefused) {
  auto g = parse_graph(kTagger, "tagger.kir");
  EXPECT_NO_THROW(verify_graph(*g, op_registry()));
  EXPECT_EQ(g->outputs()[2]->type().str(), "f32[s,2,b,6]");
  CompileOptions o;
  o.pass.target = "cpu";
  o.symbolic = true;
  compile_graph(*g, o);
  PlanBuildOptions po{"cpu", "fp32", {}};
  po.profiles = {profile()};
  const std::vector<uint8_t> bytes = plan::serialize(build_plan(*g, po));
  Engine e = Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU);
  for (auto [s, b] : {std::pair<int64_t, int64_t>{1, 1}, {5, 3}, {8, 2}}) {
    auto at = specialize_graph(*parse_graph(kTagger, "tagger.kir"), {{"s", s}, {"b", b}}, op_registry());
    std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(10 * s + b));
    std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    Context c(e);
    for (auto& [name, t] : feed) c.bind_input(name, t.raw(), KILN_F32, dims(t.shape()));
    std::vector<Tensor> got;
    const char* names[] = {"y", "yh", "gy"};
    for (size_t i = 0; i < want.size(); ++i) {
      got.emplace_back(want[i].type());
      EXPECT_EQ(c.output_shape(names[i]), dims(want[i].shape())) << "s=" << s << " b=" << b;
      c.bind_output(names[i], got[i].raw(), KILN_F32, dims(want[i].shape()));
    }
    c.run();
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i], Tolerance{1e-6, 1e-5}), "") << "s=" << s << " b=" << b << " " << i;
  }
  // A GPU plan with the same profile is refused naming the node: the
  // recurrent kernels are not shape-generic yet.
  if (!kiln_has_codegen()) return;
  auto raw = parse_graph(kTagger, "tagger.kir");
  PlanBuildOptions gpu{"sm_90", "fp32", {}};
  gpu.profiles = {profile()};
  gpu.source_name = "tagger.onnx";
  try {
    build_plan(*raw, gpu);
    ADD_FAILURE() << "a GPU plan was built";
  } catch (const Error& err) {
    const std::string e = err.what();
    EXPECT_NE(e.find("(lstm) producing %y"), std::string::npos) << e;
    EXPECT_NE(e.find("kiln has none yet for lstm (its kernel family (recurrent) has no shape-generic kernel"),
              std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace kiln
