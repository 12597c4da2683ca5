// The string ops (ONNX's STRING tensors, DType::String): reference kernels
// only. Strings are byte strings holding UTF-8, as ONNX keeps them; every op
// here compares bytes, never normalises Unicode. None has a CUDA kernel:
// string tensors run on the CPU path (reference backend) only.
//
//   string_equal(a, b) -> bool           numpy broadcasting (ONNX Equal on strings)
//   string_concat(a, b) -> string        a + b, numpy broadcasting (StringConcat)
//   string_split(x) -> (string[..., n], i64[...])   {delimiter, maxsplit} (StringSplit)
//   regex_full_match(x) -> bool          {pattern}: RE2's full match (RegexFullMatch)
//   string_normalizer(x) -> string[C'] / [1, C']    (StringNormalizer; ops/string_normalizer.cpp)
//
// string_split's result width (the most pieces of any element) and
// string_normalizer's count (the elements left after removing stopwords) are
// decided by the data: as nonzero's count, inference reads them from the
// operand's compile-time value and refuses an operand it does not know.
#include <re2/re2.h>

#include "ops/families.h"
#include "ops/op_helpers.h"
#include "ops/string_ops.h"

namespace kiln::ops {

namespace {

// out[i] = f(a[i'], b[i'']) over the broadcast shape of two string operands.
template <typename Out, typename F>
void broadcast_strings(const Tensor& a, const Tensor& b, Out* out, const Shape& os, F&& f) {
  const std::vector<int64_t> sa = broadcast_strides(a.shape(), os), sb = broadcast_strides(b.shape(), os);
  const std::vector<int64_t> so = strides_of(os);
  const int64_t n = shape_numel(os);
  const std::string* pa = a.strings();
  const std::string* pb = b.strings();
  for (int64_t k = 0; k < n; ++k) {
    int64_t ia = 0, ib = 0, rest = k;
    for (size_t d = 0; d < os.size(); ++d) {
      const int64_t q = rest / so[d];
      rest %= so[d];
      ia += q * sa[d];
      ib += q * sb[d];
    }
    out[k] = f(pa[ia], pb[ib]);
  }
}

void require_strings(InferContext& c, int i, std::string_view what) {
  if (c.dtype(i) != DType::String) c.fail("{} must be a string tensor, got {}", what, c.type(i).str());
}

OpDef string_binary(std::string name, DType result, std::string doc) {
  OpDef d;
  d.name = std::move(name);
  d.category = OpCategory::Compute;
  d.min_inputs = d.max_inputs = 2;
  d.takes_strings = true;
  d.infer = [result](InferContext& c) {
    require_strings(c, 0, "operand 0");
    require_strings(c, 1, "operand 1");
    return broadcast_result(c, result);
  };
  d.doc = std::move(doc);
  return d;
}

// ---- string_split ----

// Python's str.split(sep, maxsplit) with a separator (ONNX's reference is
// numpy's char.split): empty pieces kept, at most `maxsplit` splits (< 0: all).
std::vector<std::string> split_on(const std::string& s, const std::string& sep, int64_t maxsplit) {
  std::vector<std::string> r;
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(r.size()) < maxsplit) {
    const size_t at = s.find(sep, start);
    if (at == std::string::npos) break;
    r.push_back(s.substr(start, at - start));
    start = at + sep.size();
  }
  r.push_back(s.substr(start));
  return r;
}

bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r'; }

// str.split(None, maxsplit): runs of whitespace separate, none at either end
// gives an empty piece; the rest after `maxsplit` splits keeps its trailing
// whitespace, as Python does.
std::vector<std::string> split_on_whitespace(const std::string& s, int64_t maxsplit) {
  std::vector<std::string> r;
  size_t i = 0;
  const size_t n = s.size();
  while (true) {
    while (i < n && is_space(s[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(r.size()) == maxsplit) {
      r.push_back(s.substr(i));
      break;
    }
    size_t j = i;
    while (j < n && !is_space(s[j])) ++j;
    r.push_back(s.substr(i, j - i));
    i = j;
  }
  return r;
}

std::vector<std::vector<std::string>> split_all(const Tensor& x, const AttrMap& a) {
  const std::string sep = a.get_string("delimiter", "");
  const int64_t maxsplit = a.get_int("maxsplit", -1);
  std::vector<std::vector<std::string>> r(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i)
    r[i] = sep.empty() ? split_on_whitespace(x.strings()[i], maxsplit) : split_on(x.strings()[i], sep, maxsplit);
  return r;
}

int64_t widest(const std::vector<std::vector<std::string>>& pieces) {
  int64_t w = 0;
  for (const auto& p : pieces) w = std::max(w, static_cast<int64_t>(p.size()));
  return w;
}

std::vector<TensorType> infer_string_split(InferContext& c) {
  require_strings(c, 0, "X");
  const Tensor& x = c.require_value(0, "StringSplit's input (its widest split sets the result shape)");
  Shape y = c.shape(0);
  y.push_back(widest(split_all(x, c.attrs())));
  return {TensorType(DType::String, y), TensorType(DType::I64, c.shape(0))};
}

void string_split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto pieces = split_all(x, ctx.attrs);
  const int64_t w = ctx.out(0).shape().back();
  if (widest(pieces) != w)
    fail("{}: the input's strings split into {} pieces at most, but the result was inferred {} wide", ctx.label,
         widest(pieces), w);
  std::string* y = ctx.out(0).strings();
  int64_t* z = ctx.out(1).data<int64_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    z[i] = static_cast<int64_t>(pieces[i].size());
    for (size_t k = 0; k < pieces[i].size(); ++k) y[i * w + static_cast<int64_t>(k)] = pieces[i][k];
  }
}

// ---- regex_full_match ----

// The pattern compiled once per call; a pattern RE2 rejects is an error
// naming it and RE2's reason (caught at import, where inference compiles it).
std::unique_ptr<RE2> compile_pattern(const std::string& pattern, const std::string& label) {
  RE2::Options o;
  o.set_log_errors(false);
  auto re = std::make_unique<RE2>(pattern, o);
  if (!re->ok()) fail("{}: pattern \"{}\" is not a valid RE2 regular expression: {}", label, pattern, re->error());
  return re;
}

std::vector<TensorType> infer_regex_full_match(InferContext& c) {
  require_strings(c, 0, "X");
  compile_pattern(c.attrs().get_string("pattern", ""), c.label());
  return {TensorType(DType::Bool, c.shape(0))};
}

void regex_full_match_kernel(KernelContext& ctx) {
  const auto re = compile_pattern(ctx.attrs.get_string("pattern", ""), ctx.label);
  const Tensor& x = ctx.in(0);
  uint8_t* y = ctx.out().data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) y[i] = RE2::FullMatch(x.strings()[i], *re) ? 1 : 0;
}

}  // namespace

void register_string_ops(OpRegistry& r) {
  OpDef eq = string_binary("string_equal", DType::Bool, "bool: a == b on strings (bytes), numpy broadcasting");
  eq.reference = [](KernelContext& ctx) {
    broadcast_strings(ctx.in(0), ctx.in(1), ctx.out().data<uint8_t>(), ctx.out().shape(),
                      [](const std::string& a, const std::string& b) { return uint8_t(a == b); });
  };
  r.add(std::move(eq));

  OpDef cat = string_binary("string_concat", DType::String, "string: a + b, numpy broadcasting");
  cat.reference = [](KernelContext& ctx) {
    broadcast_strings(ctx.in(0), ctx.in(1), ctx.out().strings(), ctx.out().shape(),
                      [](const std::string& a, const std::string& b) { return a + b; });
  };
  r.add(std::move(cat));

  OpDef split;
  split.name = "string_split";
  split.category = OpCategory::Compute;
  split.min_outputs = split.max_outputs = 2;
  split.takes_strings = true;
  split.attrs = {{"delimiter", AttrKind::String}, {"maxsplit", AttrKind::Int}};
  split.infer = infer_string_split;
  split.reference = string_split_kernel;
  split.doc =
      "(string[..., n], i64[...]): each string split on the delimiter (runs of whitespace without one), at most "
      "maxsplit times, padded with \"\" to the most pieces n; and each string's count";
  r.add(std::move(split));

  OpDef re;
  re.name = "regex_full_match";
  re.category = OpCategory::Compute;
  re.takes_strings = true;
  re.attrs = {{"pattern", AttrKind::String, true}};
  re.infer = infer_regex_full_match;
  re.reference = regex_full_match_kernel;
  re.doc = "bool: whether the whole string matches the RE2 pattern";
  r.add(std::move(re));

  register_string_normalizer(r);
  register_string_cast(r);
  register_label_encoder(r);
}

}  // namespace kiln::ops
