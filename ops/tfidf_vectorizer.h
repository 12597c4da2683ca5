// The n-gram table of kiln's tfidf_vectorizer op (ONNX TfIdfVectorizer-9 on
// integer tokens), shared by the op's reference kernel (tfidf_vectorizer_op.cpp)
// and its CUDA emitter (codegen/emitters/misc/emit_tfidf.cpp) so both read the
// attributes one way.
//
//   tfidf_vectorizer(x i32|i64 [C] | [B, C])
//     {gram_tokens: ints, gram_sizes: ints, gram_columns: ints, width: int,
//      max_skip: int, mode: "TF" | "IDF" | "TFIDF", weights?: floats [width]}
//   -> f32 [width] | [B, width]
//
// Each counted n-gram g has gram_sizes[g] tokens (taken in order from
// gram_tokens) and adds its count to output column gram_columns[g]. The
// frontend keeps only the n-grams ONNX counts (sizes within
// [min_gram_length, max_gram_length]; of repeated n-grams the last one).
// A gram of n >= 2 tokens is counted at every start s and skip distance
// d = 1 .. max_skip + 1 with s + d (n - 1) < C where the row's tokens
// s, s + d, ... equal it; a unigram once per occurrence (skips do not apply),
// as onnx/reference/ops/op_tfidf_vectorizer.py. The column's value from its
// count f: TF f; IDF (f > 0) times weights[col] (1 without weights); TFIDF
// f times weights[col] (1 without weights).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/attribute.h"

namespace kiln::ops {

enum class TfIdfMode { TF, IDF, TFIDF };

struct TfIdfSpec {
  std::vector<int64_t> tokens;   // every counted n-gram's tokens, concatenated
  std::vector<int64_t> offsets;  // n-gram g is tokens[offsets[g] .. offsets[g + 1])
  std::vector<int64_t> columns;  // n-gram g's output column
  int64_t width = 0;             // output columns
  int64_t max_skip = 0;
  TfIdfMode mode = TfIdfMode::TF;
  std::vector<float> weights;  // empty, or one per column
  int64_t grams() const { return static_cast<int64_t>(columns.size()); }
};

// Reads and checks the attributes; throws kiln::Error with a plain message
// (the caller names the node).
TfIdfSpec tfidf_spec(const AttrMap& a);

// How many times n-gram g occurs in `row` (C tokens) under the skip rule above.
int64_t tfidf_gram_count(const TfIdfSpec& s, int64_t g, const int64_t* row, int64_t C);

// A column's value from its total count.
float tfidf_value(const TfIdfSpec& s, int64_t column, int64_t count);

}  // namespace kiln::ops
