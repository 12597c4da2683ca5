// ONNX adapters for the misc family (see import_context.h). Ops without an
// entry here import 1:1 under their default kiln name.
#include <algorithm>
#include <map>

#include "frontend/import_context.h"
#include "frontend/tensor_proto.h"
#include "ir/data_dependent.h"
#include "ir/symbolic_dim.h"
#include "ops/misc_internal.h"

namespace kiln::adapters {

namespace {

// Rejects attributes outside `known`.
void check_attrs(ImportContext& c, std::initializer_list<const char*> known) {
  for (auto& [name, v] : c.attrs()) {
    bool ok = false;
    for (const char* k : known) ok |= name == k;
    if (!ok) c.unsupported("attribute '{}' is not supported", name);
  }
}

// A scalar (or one-element) compile-time operand.
double scalar_value(ImportContext& c, int i, const std::string& what) {
  const Tensor& t = c.require_value(i, what);
  if (t.numel() != 1) c.fail("{} (operand {}) must hold one value, got shape [{}]", what, i, fmt::join(t.shape(), ","));
  return t.get_double(0);
}
int64_t int_value(ImportContext& c, int i, const std::string& what) {
  const Tensor& t = c.require_value(i, what);
  if (t.numel() != 1) c.fail("{} (operand {}) must hold one value, got shape [{}]", what, i, fmt::join(t.shape(), ","));
  return t.get_int(0);
}

std::vector<Value*> all_inputs(ImportContext& c) {
  std::vector<Value*> ins;
  for (int i = 0; i < c.num_inputs(); ++i) ins.push_back(c.has_input(i) ? c.input(i) : nullptr);
  return ins;
}

// Trailing unused outputs are not produced.
int outputs_needed(ImportContext& c) {
  int n = c.num_outputs();
  while (n > 1 && !c.output_used(n - 1)) --n;
  return n;
}

// RNN / GRU / LSTM: activations made explicit per direction with positional
// alphas/betas; hidden_size taken from R when absent; opset-1 output_sequence dropped.
void recurrent(ImportContext& c, const std::string& op) {
  std::vector<const char*> known = {"activation_alpha", "activation_beta", "activations", "clip",
                                    "direction",        "hidden_size",     "layout",      "output_sequence"};
  if (op == "lstm") known.push_back("input_forget");
  if (op == "gru") known.push_back("linear_before_reset");
  for (auto& [name, v] : c.attrs()) {
    bool ok = false;
    for (const char* k : known) ok |= name == k;
    if (!ok) c.unsupported("attribute '{}' is not supported", name);
  }
  AttrMap a = c.attrs();
  a.erase("output_sequence");
  if (!a.has("hidden_size")) {
    const Shape& r = c.input(2)->shape();
    if (r.size() != 3) c.fail("R must be 3-D, got rank {}", r.size());
    a.set("hidden_size", r[2]);
  }
  std::string dir = a.get_string("direction", "forward");
  int dirs = dir == "bidirectional" ? 2 : 1;
  try {
    ops::normalize_rnn_activations(op, dirs, a);
  } catch (const Unsupported& e) {
    c.unsupported("{}", e.what());
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  c.set_outputs(c.emit(op, all_inputs(c), a, outputs_needed(c)));
}

std::string output_dtype(ImportContext& c, int dflt) {
  int code = static_cast<int>(c.attrs().get_int("output_datatype", dflt));
  return std::string(dtype_name(dtype_from_onnx(code, c.label() + " attribute 'output_datatype'")));
}

// HannWindow / HammingWindow / BlackmanWindow: size operand -> attribute.
void window(ImportContext& c, const std::string& op) {
  check_attrs(c, {"output_datatype", "periodic"});
  AttrMap a;
  a.set("size", int_value(c, 0, "window size"));
  a.set("periodic", c.attrs().get_int("periodic", 1));
  a.set("dtype", output_dtype(c, 1));
  c.set_outputs(c.emit(op, {}, a));
}

// DFT: dft_length operand and (opset >= 20) axis operand -> attributes.
void dft(ImportContext& c) {
  check_attrs(c, {"axis", "inverse", "onesided"});
  AttrMap a;
  int64_t axis = c.attrs().get_int("axis", 1);
  if (c.opset() >= 20) {
    if (c.attrs().has("axis")) c.fail("axis is an operand from opset 20 on, not an attribute");
    axis = c.has_input(2) ? int_value(c, 2, "axis") : -2;
    // Negative axes count over the full rank: -2 is the last signal dim.
  }
  a.set("axis", axis);
  if (c.has_input(1)) a.set("length", int_value(c, 1, "dft_length"));
  a.set("inverse", c.attrs().get_int("inverse", 0));
  a.set("onesided", c.attrs().get_int("onesided", 0));
  c.set_outputs(c.emit("dft", {c.input(0)}, a));
}

// STFT(signal, frame_step, window?, frame_length?)
void stft(ImportContext& c) {
  check_attrs(c, {"onesided"});
  AttrMap a;
  a.set("frame_step", int_value(c, 1, "frame_step"));
  int64_t len;
  if (c.has_input(3)) len = int_value(c, 3, "frame_length");
  else if (c.has_input(2) && c.input(2)->shape().size() == 1) len = c.input(2)->shape()[0];
  else if (c.input(0)->shape().size() >= 2) len = c.input(0)->shape()[1];
  else c.fail("signal must be [batch, length, 1|2]");
  a.set("frame_length", len);
  a.set("onesided", c.attrs().get_int("onesided", 1));
  std::vector<Value*> ins{c.input(0)};
  if (c.has_input(2)) ins.push_back(c.input(2));
  c.set_outputs(c.emit("stft", ins, a));
}

// MelWeightMatrix: every operand -> attribute.
void mel_weight_matrix(ImportContext& c) {
  check_attrs(c, {"output_datatype"});
  AttrMap a;
  a.set("num_mel_bins", int_value(c, 0, "num_mel_bins"));
  a.set("dft_length", int_value(c, 1, "dft_length"));
  a.set("sample_rate", int_value(c, 2, "sample_rate"));
  a.set("lower_edge_hertz", static_cast<float>(scalar_value(c, 3, "lower_edge_hertz")));
  a.set("upper_edge_hertz", static_cast<float>(scalar_value(c, 4, "upper_edge_hertz")));
  a.set("dtype", output_dtype(c, 1));
  c.set_outputs(c.emit("mel_weight_matrix", {}, a));
}

// NonMaxSuppression: the scalar operands -> attributes.
void non_max_suppression(ImportContext& c) {
  check_attrs(c, {"center_point_box"});
  AttrMap a;
  a.set("center_point_box", c.attrs().get_int("center_point_box", 0));
  a.set("max_output_boxes_per_class", c.has_input(2) ? int_value(c, 2, "max_output_boxes_per_class") : int64_t(0));
  a.set("iou_threshold", c.has_input(3) ? static_cast<float>(scalar_value(c, 3, "iou_threshold")) : 0.0f);
  if (c.has_input(4)) a.set("score_threshold", static_cast<float>(scalar_value(c, 4, "score_threshold")));
  // Boxes and scores that the model alone fixes give a count known at compile
  // time; others leave it to the run: a size symbol in [0, batches * classes *
  // min(max_output_boxes_per_class, boxes)] (ir/data_dependent.h).
  if (!c.fixed_value(c.input(0)) || !c.fixed_value(c.input(1))) {
    const Shape& scores = c.input(1)->shape();
    const Shape& boxes = c.input(0)->shape();
    if (scores.size() != 3 || boxes.size() != 3)
      c.fail("boxes must be [batch, boxes, 4] and scores [batch, classes, boxes], got {} and {}",
             c.input(0)->type().str(), c.input(1)->type().str());
    const int64_t per_class = a.get_int("max_output_boxes_per_class", 0);
    // min(per_class, boxes) per batch and class. With a symbolic box count
    // (boxes a score threshold kept), the bound is that count at its max,
    // capped by per_class where that is smaller (torchvision exports
    // INT64_MAX: no cap).
    const int64_t classes = dim_mul(scores[0], scores[1]);
    const bool symbolic_boxes = is_symbolic_dim(boxes[1]);
    const int64_t keep = symbolic_boxes ? boxes[1] : std::min(per_class, boxes[1]);
    int64_t cap = -1;
    if (symbolic_boxes && !is_symbolic_dim(classes) && (classes == 0 || per_class <= INT64_MAX / classes))
      cap = classes * per_class;
    std::string sym = c.declare_size_symbol("nms_n", dim_mul(classes, keep), cap);
    if (!sym.empty()) a.set(kSizeSymbolAttr, sym);
  }
  c.set_outputs(c.emit("non_max_suppression", {c.input(0), c.input(1)}, a));
}

// TfIdfVectorizer-9 on integer tokens (tfidf_vectorizer, ops/tfidf_vectorizer.h).
// The pool holds blocks of 1-grams, 2-grams, ... starting at ngram_counts;
// n-gram i of the pool (all sizes numbered in order) goes to output column
// ngram_indexes[i]. Only the n-grams ONNX counts reach the kiln op: sizes in
// [min_gram_length, max_gram_length]. An n-gram of those sizes listed twice
// is an error, as in ONNX Runtime (ONNX's reference would silently count it
// in the last copy's column only).
void tfidf_vectorizer(ImportContext& c) {
  check_attrs(c, {"max_gram_length", "max_skip_count", "min_gram_length", "mode", "ngram_counts", "ngram_indexes",
                  "pool_int64s", "pool_strings", "weights"});
  if (c.attrs().has("pool_strings"))
    c.unsupported("pool_strings: string tokens are not supported (kiln has no string tensors)");
  if (!c.attrs().has("pool_int64s")) c.fail("pool_int64s (or pool_strings) is required");
  const int64_t min_n = c.attrs().require_int("min_gram_length"), max_n = c.attrs().require_int("max_gram_length");
  if (min_n < 1 || max_n < min_n)
    c.fail("min_gram_length {} and max_gram_length {} must satisfy 1 <= min <= max", min_n, max_n);
  const std::vector<int64_t> pool = c.attrs().get_ints("pool_int64s");
  const std::vector<int64_t> starts = c.attrs().get_ints("ngram_counts");
  const std::vector<int64_t> indexes = c.attrs().get_ints("ngram_indexes");
  if (indexes.empty()) c.fail("ngram_indexes is empty");
  const int64_t total = static_cast<int64_t>(pool.size());
  std::vector<std::vector<int64_t>> grams;
  std::vector<int64_t> columns;
  int64_t id = 0;  // the pool n-gram's number, over every size
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 1, begin = starts[i];
    const int64_t end = i + 1 < starts.size() ? starts[i + 1] : total;
    if (begin < 0 || begin > end || end > total)
      c.fail("ngram_counts [{}] is not a non-decreasing list of offsets into the {} pool entries",
             fmt::join(starts, ","), total);
    if ((end - begin) % n != 0)
      c.fail("the {}-grams take {} pool entries (offsets {}..{}), not a multiple of {}", n, end - begin, begin, end, n);
    for (int64_t at = begin; at < end; at += n, ++id) {
      if (id >= static_cast<int64_t>(indexes.size()))
        c.fail("ngram_indexes has {} entries, fewer than the pool's n-grams", indexes.size());
      if (indexes[id] < 0) c.fail("ngram_indexes[{}] is {}: a column index must be >= 0", id, indexes[id]);
      if (n < min_n || n > max_n) continue;
      grams.emplace_back(pool.begin() + at, pool.begin() + at + n);
      columns.push_back(indexes[id]);
    }
  }
  if (id != static_cast<int64_t>(indexes.size()))
    c.fail("ngram_indexes has {} entries for the pool's {} n-grams (one each)", indexes.size(), id);
  std::map<std::vector<int64_t>, size_t> first;
  for (size_t g = 0; g < grams.size(); ++g)
    if (auto [it, fresh] = first.emplace(grams[g], g); !fresh)
      c.fail("the n-gram [{}] is in the pool twice (its columns {} and {})", fmt::join(grams[g], ","),
             columns[it->second], columns[g]);
  AttrMap a;
  std::vector<int64_t> tokens, sizes, cols;
  for (size_t g = 0; g < grams.size(); ++g) {
    tokens.insert(tokens.end(), grams[g].begin(), grams[g].end());
    sizes.push_back(static_cast<int64_t>(grams[g].size()));
    cols.push_back(columns[g]);
  }
  if (!sizes.empty()) {  // none when the pool has no n-gram of the counted sizes: every column is 0
    a.set("gram_tokens", tokens);
    a.set("gram_sizes", sizes);
    a.set("gram_columns", cols);
  }
  a.set("width", *std::max_element(indexes.begin(), indexes.end()) + 1);
  a.set("max_skip", c.attrs().require_int("max_skip_count"));
  a.set("mode", c.attrs().get_string("mode", ""));
  if (c.attrs().has("weights")) a.set("weights", c.attrs().get_floats("weights"));
  c.set_outputs(c.emit("tfidf_vectorizer", {c.input(0)}, a));
}

}  // namespace

void register_misc(AdapterTable& t) {
  t.add("RNN", [](ImportContext& c) { recurrent(c, "rnn"); });
  t.add("GRU", [](ImportContext& c) { recurrent(c, "gru"); });
  t.add("LSTM", [](ImportContext& c) { recurrent(c, "lstm"); });
  t.add("HannWindow", [](ImportContext& c) { window(c, "hann_window"); });
  t.add("HammingWindow", [](ImportContext& c) { window(c, "hamming_window"); });
  t.add("BlackmanWindow", [](ImportContext& c) { window(c, "blackman_window"); });
  t.add("DFT", dft);
  t.add("STFT", stft);
  t.add("MelWeightMatrix", mel_weight_matrix);
  t.add("NonMaxSuppression", non_max_suppression);
  t.add("TfIdfVectorizer", tfidf_vectorizer);
}

}  // namespace kiln::adapters
