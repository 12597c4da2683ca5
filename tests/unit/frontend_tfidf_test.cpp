// TfIdfVectorizer-9 (frontend/adapters_misc.cpp, ops/tfidf_vectorizer_op.cpp)
// through import and the reference backend: the counts of ONNX's own test
// vectors (onnx/backend/test/case/node/tfidfvectorizer.py's pool, 1-D and
// batched, with and without skips, an empty unigram level), IDF and TFIDF
// with and without weights, int64 tokens beyond 2^53, n-grams of sizes
// outside [min, max], a skipped trigram, and the errors that name the node (a
// repeated n-gram among them, as ONNX Runtime refuses it).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"

namespace kiln {
namespace {

struct Attrs {
  std::string mode = "TF";
  int64_t min_n = 1, max_n = 2, skip = 0;
  std::vector<int64_t> counts, indexes, pool;
  std::vector<float> weights;
  bool strings = false;
};

onnx::ModelProto tfidf_model(const Attrs& at, int elem, const std::vector<int64_t>& dims) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.add_opset_import()->set_version(21);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type("TfIdfVectorizer");
  n->set_name("tf");
  n->add_input("x");
  n->add_output("y");
  auto* vi = g->add_input();
  vi->set_name("x");
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  g->add_output()->set_name("y");
  auto int_attr = [&](const char* name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  auto ints_attr = [&](const char* name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  int_attr("min_gram_length", at.min_n);
  int_attr("max_gram_length", at.max_n);
  int_attr("max_skip_count", at.skip);
  auto* mode = n->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s(at.mode);
  ints_attr("ngram_counts", at.counts);
  ints_attr("ngram_indexes", at.indexes);
  if (at.strings) {
    auto* a = n->add_attribute();
    a->set_name("pool_strings");
    a->set_type(onnx::AttributeProto::STRINGS);
    a->add_strings("a");
  } else {
    ints_attr("pool_int64s", at.pool);
  }
  if (!at.weights.empty()) {
    auto* a = n->add_attribute();
    a->set_name("weights");
    a->set_type(onnx::AttributeProto::FLOATS);
    for (float w : at.weights) a->add_floats(w);
  }
  return m;
}

std::vector<double> run(const Attrs& at, const std::vector<int64_t>& tokens, const std::vector<int64_t>& dims,
                        DType dt = DType::I32) {
  const int elem = dt == DType::I32 ? onnx::TensorProto::INT32 : onnx::TensorProto::INT64;
  ImportResult r = import_onnx_bytes(tfidf_model(at, elem, dims).SerializeAsString(), ".", "m.onnx");
  Tensor x(TensorType(dt, Shape(dims.begin(), dims.end())));
  for (size_t i = 0; i < tokens.size(); ++i) x.set_int(static_cast<int64_t>(i), tokens[i]);
  Tensor y = ReferenceExecutor(*r.graph).run({{"x", x}}).at(0);
  std::vector<double> v;
  for (int64_t i = 0; i < y.numel(); ++i) v.push_back(y.get_double(i));
  return v;
}

std::string error_of(const Attrs& at) {
  try {
    import_onnx_bytes(tfidf_model(at, onnx::TensorProto::INT32, {12}).SerializeAsString(), ".", "m.onnx");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ONNX's test pool: unigrams 2 3 5 4, bigrams (5,6) (7,8) (6,7).
Attrs onnx_pool(int64_t min_n, int64_t skip) {
  Attrs a;
  a.min_n = min_n;
  a.skip = skip;
  a.counts = {0, 4};
  a.indexes = {0, 1, 2, 3, 4, 5, 6};
  a.pool = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7};
  return a;
}

const std::vector<int64_t> kTokens = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(FrontendTfIdf, OnnxTestVectors) {
  EXPECT_EQ(run(onnx_pool(2, 0), kTokens, {12}), (std::vector<double>{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(run(onnx_pool(2, 5), kTokens, {12}), (std::vector<double>{0, 0, 0, 0, 1, 3, 1}));
  EXPECT_EQ(run(onnx_pool(1, 5), kTokens, {12}), (std::vector<double>{0, 3, 1, 0, 1, 3, 1}));
  EXPECT_EQ(run(onnx_pool(2, 0), kTokens, {2, 6}), (std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}));
  EXPECT_EQ(run(onnx_pool(2, 5), kTokens, {2, 6}), (std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(run(onnx_pool(1, 5), kTokens, {2, 6}), (std::vector<double>{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1}));
  Attrs empty_level;
  empty_level.min_n = 2;
  empty_level.counts = {0, 0};
  empty_level.indexes = {0, 1, 2};
  empty_level.pool = {5, 6, 7, 8, 6, 7};
  EXPECT_EQ(run(empty_level, kTokens, {12}), (std::vector<double>{1, 1, 1}));
}

TEST(FrontendTfIdf, WeightingModes) {
  Attrs a = onnx_pool(1, 5);
  a.mode = "IDF";
  EXPECT_EQ(run(a, kTokens, {12}), (std::vector<double>{0, 1, 1, 0, 1, 1, 1}));
  a.weights = {1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(run(a, kTokens, {12}), (std::vector<double>{0, 2, 3, 0, 5, 6, 7}));
  a.mode = "TFIDF";
  EXPECT_EQ(run(a, kTokens, {12}), (std::vector<double>{0, 6, 3, 0, 5, 18, 7}));
  a.weights.clear();
  EXPECT_EQ(run(a, kTokens, {12}), (std::vector<double>{0, 3, 1, 0, 1, 3, 1}));
  a.mode = "TF";  // TF ignores weights
  a.weights = {9, 9, 9, 9, 9, 9, 9};
  EXPECT_EQ(run(a, kTokens, {12}), (std::vector<double>{0, 3, 1, 0, 1, 3, 1}));
}

TEST(FrontendTfIdf, PoolRulesAndInt64Tokens) {
  // Unigrams 7 and 8, the bigram (7,8), the trigram (7,8,7); max_gram_length 2
  // leaves the trigram uncounted (column 3 stays 0).
  Attrs a;
  a.counts = {0, 2, 4};
  a.indexes = {0, 1, 2, 3};
  a.pool = {7, 8, 7, 8, 7, 8, 7};
  EXPECT_EQ(run(a, {7, 8, 7, 8, 7}, {5}), (std::vector<double>{3, 2, 2, 0}));
  a.max_n = 3;
  EXPECT_EQ(run(a, {7, 8, 7, 8, 7}, {5}), (std::vector<double>{3, 2, 2, 2}));
  // A trigram with one skip: (1,2,3) at distance 1 once and at distance 2 once.
  Attrs t;
  t.min_n = t.max_n = 3;
  t.skip = 1;
  t.counts = {0, 0, 0};
  t.indexes = {0};
  t.pool = {1, 2, 3};
  EXPECT_EQ(run(t, {1, 9, 2, 9, 3, 1, 2, 3}, {8}), (std::vector<double>{2}));
  // int64 tokens that a double cannot hold exactly.
  const int64_t big = (int64_t(1) << 60) + 1;
  Attrs c;
  c.counts = {0};
  c.indexes = {0, 1};
  c.pool = {big, big - 1};
  EXPECT_EQ(run(c, {big, big, big - 1, big + 1}, {4}, DType::I64), (std::vector<double>{2, 1}));
}

TEST(FrontendTfIdf, BadAttributesNameTheNode) {
  Attrs a = onnx_pool(1, 0);
  a.counts = {0, 5};  // 5 bigram tokens
  EXPECT_HAS(error_of(a), "node \"tf\" (TfIdfVectorizer): the 2-grams take 5 pool entries");
  a = onnx_pool(1, 0);
  a.indexes = {0, 1, 2};
  EXPECT_HAS(error_of(a), "ngram_indexes has 3 entries, fewer than the pool's n-grams");
  a = onnx_pool(1, 0);
  a.indexes.push_back(7);
  EXPECT_HAS(error_of(a), "ngram_indexes has 8 entries for the pool's 7 n-grams");
  a = onnx_pool(3, 0);
  EXPECT_HAS(error_of(a), "min_gram_length 3 and max_gram_length 2");
  a = onnx_pool(1, 0);
  a.mode = "BM25";
  EXPECT_HAS(error_of(a), "node \"tf\" (TfIdfVectorizer): mode 'BM25' is not TF, IDF or TFIDF");
  a = onnx_pool(1, 0);
  a.weights = {1, 2};
  EXPECT_HAS(error_of(a), "2 weights for 7 output columns");
  a = onnx_pool(1, 0);
  a.strings = true;
  EXPECT_HAS(error_of(a), "pool_strings: string tokens are not supported");
  a = onnx_pool(1, 0);
  a.skip = -1;
  EXPECT_HAS(error_of(a), "max_skip -1 is negative");
  // A repeated n-gram is an error, as in ONNX Runtime.
  a = onnx_pool(1, 0);
  a.pool = {2, 3, 5, 3, 5, 6, 7, 8, 6, 7};
  EXPECT_HAS(error_of(a), "the n-gram [3] is in the pool twice (its columns 1 and 3)");
}

}  // namespace
}  // namespace kiln
