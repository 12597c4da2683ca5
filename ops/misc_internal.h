// Entries of the files that make up the misc family (misc_ops.cpp calls the
// registrations), and the RNN activation normalisation the ONNX adapter uses.
#pragma once
#include <string>

#include "ir/op_registry.h"

namespace kiln::ops {

void register_rnn_ops(OpRegistry& r);               // rnn_ops.cpp: rnn, gru, lstm
void register_signal_ops(OpRegistry& r);            // signal_ops.cpp: windows, dft, stft, mel_weight_matrix
void register_attention_ops(OpRegistry& r);         // attention_ops.cpp: attention (made by recognize-patterns)
void register_linear_attention_ops(OpRegistry& r);  // linear_attention_op.cpp: linear_attention (ONNX LinearAttention)
void register_tfidf_vectorizer_op(OpRegistry& r);   // tfidf_vectorizer_op.cpp: tfidf_vectorizer (ONNX TfIdfVectorizer)
void register_tree_ensemble_op(OpRegistry& r);  // tree_ensemble_op.cpp: tree_ensemble (ONNX ai.onnx.ml TreeEnsemble*)

// Rewrites ONNX `activations` / `activation_alpha` / `activation_beta` of an
// rnn/gru/lstm node with `dirs` directions into kiln's form: every direction's
// functions spelled as in ONNX, and one alpha and one beta per function
// (defaults filled in). Throws kiln::Error / kiln::Unsupported with a plain message.
void normalize_rnn_activations(const std::string& kiln_op, int dirs, AttrMap& attrs);

}  // namespace kiln::ops
