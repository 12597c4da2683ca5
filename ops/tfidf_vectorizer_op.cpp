// tfidf_vectorizer: n-gram counts of integer token rows (ONNX
// TfIdfVectorizer-9); the attributes and the counting rule are described in
// tfidf_vectorizer.h. The reference counts every n-gram of the table
// directly, which is what the trie walk of ONNX's reference and ONNX
// Runtime computes: a walk from a start with skip distance d reaches depth n
// exactly when the n tokens at s, s + d, ... form a prefix path of the
// table, and it records the id of each table n-gram it reaches.
#include "ops/tfidf_vectorizer.h"

#include <algorithm>

#include "ir/error.h"
#include "ops/misc_internal.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace {

// The widest output kiln accepts: the column index comes from the model.
constexpr int64_t kMaxWidth = int64_t(1) << 31;

std::vector<TensorType> infer_tfidf(InferContext& c) {
  require_dtype(c, 0, {DType::I32, DType::I64});
  TfIdfSpec s;
  try {
    s = tfidf_spec(c.attrs());
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  const Shape& x = c.shape(0);
  if (c.rank(0) > 2) c.fail("input {} must be [C] or [B, C]", c.type(0).str());
  if (c.rank(0) == 2 && x[0] < 1) c.fail("input {} must have B > 0 rows", c.type(0).str());
  if (c.rank(0) == 2) return {TensorType(DType::F32, {x[0], s.width})};
  return {TensorType(DType::F32, {s.width})};
}

void tfidf_reference(KernelContext& ctx) {
  const TfIdfSpec s = tfidf_spec(ctx.attrs);
  const Tensor& x = ctx.in(0);
  const std::vector<int64_t> tokens = load_all<int64_t>(x);
  const int64_t C = x.rank() == 0 ? 1 : x.shape().back();
  const int64_t rows = x.rank() == 2 ? x.shape()[0] : 1;
  std::vector<float> out(static_cast<size_t>(rows * s.width));
  std::vector<int64_t> counts(static_cast<size_t>(s.width));
  for (int64_t b = 0; b < rows; ++b) {
    std::fill(counts.begin(), counts.end(), 0);
    for (int64_t g = 0; g < s.grams(); ++g) counts[s.columns[g]] += tfidf_gram_count(s, g, tokens.data() + b * C, C);
    for (int64_t col = 0; col < s.width; ++col) out[b * s.width + col] = tfidf_value(s, col, counts[col]);
  }
  store_all(ctx.out(), out);
}

OpDef tfidf_vectorizer_op() {
  OpDef d;
  d.name = "tfidf_vectorizer";
  d.category = OpCategory::Compute;
  d.attrs = {{"gram_tokens", AttrKind::Ints}, {"gram_sizes", AttrKind::Ints},    {"gram_columns", AttrKind::Ints},
             {"width", AttrKind::Int, true},  {"max_skip", AttrKind::Int, true}, {"mode", AttrKind::String, true},
             {"weights", AttrKind::Floats}};
  d.infer = infer_tfidf;
  d.reference = tfidf_reference;
  d.doc =
      "n-gram counts of integer token rows ([C] or [B,C]) into `width` f32 columns (ONNX TfIdfVectorizer): each "
      "n-gram of the table counted at every start and skip distance 1..max_skip+1 (unigrams once), weighted by "
      "mode TF, IDF or TFIDF";
  return d;
}

}  // namespace

TfIdfSpec tfidf_spec(const AttrMap& a) {
  TfIdfSpec s;
  s.tokens = a.get_ints("gram_tokens");
  const std::vector<int64_t> sizes = a.get_ints("gram_sizes");
  s.columns = a.get_ints("gram_columns");
  s.width = a.require_int("width");
  s.max_skip = a.require_int("max_skip");
  const std::string mode = a.get_string("mode", "");
  if (mode == "TF") s.mode = TfIdfMode::TF;
  else if (mode == "IDF") s.mode = TfIdfMode::IDF;
  else if (mode == "TFIDF") s.mode = TfIdfMode::TFIDF;
  else fail("mode '{}' is not TF, IDF or TFIDF", mode);
  s.weights = a.get_floats("weights");
  if (s.width < 0 || s.width > kMaxWidth) fail("output width {} is out of range (0 .. {})", s.width, kMaxWidth);
  if (s.max_skip < 0) fail("max_skip {} is negative", s.max_skip);
  if (sizes.size() != s.columns.size())
    fail("{} n-gram sizes for {} n-gram columns (one each)", sizes.size(), s.columns.size());
  if (!s.weights.empty() && static_cast<int64_t>(s.weights.size()) != s.width)
    fail("{} weights for {} output columns (one each)", s.weights.size(), s.width);
  s.offsets.push_back(0);
  for (size_t g = 0; g < sizes.size(); ++g) {
    if (sizes[g] < 1) fail("n-gram {} has {} tokens", g, sizes[g]);
    if (s.columns[g] < 0 || s.columns[g] >= s.width)
      fail("n-gram {} goes to column {}, outside the {} output columns", g, s.columns[g], s.width);
    if (sizes[g] > static_cast<int64_t>(s.tokens.size()) - s.offsets.back())
      fail("the n-gram sizes need more than the {} tokens given", s.tokens.size());
    s.offsets.push_back(s.offsets.back() + sizes[g]);
  }
  if (s.offsets.back() != static_cast<int64_t>(s.tokens.size()))
    fail("the n-gram sizes add up to {} tokens, but {} are given", s.offsets.back(), s.tokens.size());
  return s;
}

int64_t tfidf_gram_count(const TfIdfSpec& s, int64_t g, const int64_t* row, int64_t C) {
  const int64_t* tok = s.tokens.data() + s.offsets[g];
  const int64_t n = s.offsets[g + 1] - s.offsets[g];
  const int64_t last_skip = n == 1 ? 1 : s.max_skip + 1;
  int64_t count = 0;
  for (int64_t d = 1; d <= last_skip; ++d)
    for (int64_t start = 0; start + d * (n - 1) < C; ++start) {
      int64_t k = 0;
      while (k < n && row[start + k * d] == tok[k]) ++k;
      count += k == n;
    }
  return count;
}

float tfidf_value(const TfIdfSpec& s, int64_t column, int64_t count) {
  const float w = s.weights.empty() ? 1.0f : s.weights[column];
  switch (s.mode) {
    case TfIdfMode::TF:
      return static_cast<float>(count);
    case TfIdfMode::IDF:
      return count > 0 ? w : 0.0f;
    case TfIdfMode::TFIDF:
      return w * static_cast<float>(count);
  }
  return 0.0f;
}

void register_tfidf_vectorizer_op(OpRegistry& r) { r.add(tfidf_vectorizer_op()); }

}  // namespace kiln::ops
