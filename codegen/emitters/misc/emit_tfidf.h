// The kernel of tfidf_vectorizer (ops/tfidf_vectorizer.h, ONNX TfIdfVectorizer):
// one thread per output value (row, column), a grid-stride loop of 256
// threads per block. The n-gram table travels as one i64 tensor after the
// operand (NodeKernel::extra), sorted by column so that a thread visits only
// its column's n-grams:
//   [0, width]                      first n-gram of each column (width + 1)
//   [width + 1, width + 2 + G]      token offset of each n-gram (G + 1)
//   [width + 2 + G, ...)            the tokens
// and the weights, where the node has them, as an f32 tensor after it. The
// thread counts each of its n-grams with the reference's loops
// (tfidf_gram_count) in 64-bit integers and writes the mode's value in f32,
// so the result is the reference's exactly.
#pragma once
#include <vector>

#include "codegen/emitters/misc/emit_misc_ops.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

struct TfIdfKernel {
  SimpleKernel kernel;
  std::vector<Tensor> tables;  // the n-gram table (i64), then the weights (f32) if any
};

// tfidf_vectorizer(x i32|i64 [C] | [B, C]) -> out f32 [width] | [B, width].
TfIdfKernel emit_tfidf_vectorizer(const AttrMap& attrs, const TensorType& x, const TensorType& out);

}  // namespace kiln::codegen
