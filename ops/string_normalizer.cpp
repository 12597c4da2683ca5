// string_normalizer (ONNX StringNormalizer, as ONNX Runtime runs it): X is
// string[C] or string[1, C]; the elements equal to a stopword are removed
// (compared byte for byte, or after lower-casing both when
// is_case_sensitive is 0), the rest upper- or lower-cased
// (case_change_action) in the `locale`. When nothing is left the result is
// one empty string ([1] or [1, 1]), as ONNX specifies.
//
// Case is changed code point by code point with the C library's towupper_l /
// towlower_l in the named locale (glibc's tables are Unicode's simple case
// mappings): a locale the machine lacks is an error naming it, never a quiet
// fallback. Without the attribute kiln uses C.UTF-8, which every glibc has
// (ONNX Runtime's default, en_US, is not installed on minimal systems).
//
// How many elements remain is decided by the data; inference reads the
// operand's compile-time value when there are stopwords (as nonzero does).
#include <locale.h>
#include <wctype.h>

#include <map>
#include <mutex>
#include <set>

#include "ops/op_helpers.h"
#include "ops/string_ops.h"

namespace kiln::ops {

namespace {

// The locale handles made so far, one per name, freed at exit (so that
// LeakSanitizer sees no handle lost).
struct LocaleCache {
  std::mutex mu;
  std::map<std::string, locale_t> handles;
  ~LocaleCache() {
    for (auto& [name, l] : handles) freelocale(l);
  }
};

// A locale handle for LC_CTYPE, created once per name and kept for the
// process (newlocale's handles are cheap and few names are ever used).
locale_t ctype_locale(const std::string& name, const std::string& label) {
  static LocaleCache locales;
  std::lock_guard<std::mutex> lock(locales.mu);
  std::map<std::string, locale_t>& cache = locales.handles;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  std::vector<std::string> tries;
  if (name.empty()) tries = {"C.UTF-8", "C.utf8"};
  else if (name.find('.') == std::string::npos) tries = {name + ".UTF-8", name + ".utf8", name};
  else tries = {name};
  for (const std::string& t : tries)
    if (locale_t l = newlocale(LC_CTYPE_MASK, t.c_str(), static_cast<locale_t>(0))) return cache[name] = l;
  fail("{}: locale \"{}\" is not installed on this machine (tried {}); `locale -a` lists those that are", label, name,
       fmt::join(tries, ", "));
}

// Decodes one UTF-8 sequence at s[i]; false for a malformed one.
bool decode(const std::string& s, size_t& i, char32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return false;
  cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
  for (int k = 1; k < len; ++k) {
    if ((b(i + k) >> 6) != 2) return false;
    cp = cp << 6 | (b(i + k) & 0x3f);
  }
  static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;  // overlong, surrogate
  i += len;
  return true;
}

void encode(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3f));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

struct Normalizer {
  std::string action;  // NONE, LOWER, UPPER
  bool case_sensitive = false;
  std::string locale;
  std::set<std::string> stops;  // lower-cased when comparing case-insensitively
  std::string label;

  Normalizer(const AttrMap& a, std::string lbl) : label(std::move(lbl)) {
    action = a.get_string("case_change_action", "NONE");
    if (action != "NONE" && action != "LOWER" && action != "UPPER")
      fail("{}: case_change_action is \"{}\"; it must be NONE, LOWER or UPPER", label, action);
    case_sensitive = a.get_int("is_case_sensitive", 0) != 0;
    locale = a.get_string("locale", "");
    if (!locale.empty() || action != "NONE" || !case_sensitive) ctype_locale(locale, label);  // named now, at import
    for (const std::string& w : a.has("stopwords") ? a.get_strings("stopwords") : std::vector<std::string>{})
      stops.insert(case_sensitive ? w : change_case(w, false, locale, label));
  }
  bool is_stopword(const std::string& s) const {
    if (stops.empty()) return false;
    return stops.count(case_sensitive ? s : change_case(s, false, locale, label)) > 0;
  }
  std::string normalize(const std::string& s) const {
    return action == "NONE" ? s : change_case(s, action == "UPPER", locale, label);
  }
};

void check_shape(InferContext& c) {
  if (c.dtype(0) != DType::String) c.fail("X must be a string tensor, got {}", c.type(0).str());
  const Shape& s = c.shape(0);
  if (!(s.size() == 1 || (s.size() == 2 && s[0] == 1)))
    c.fail("X is {}; StringNormalizer takes [C] or [1, C]", c.type(0).str());
}

Shape result_shape(const Shape& in, int64_t kept) {
  const int64_t n = std::max<int64_t>(kept, 1);  // nothing left: one empty string
  return in.size() == 1 ? Shape{n} : Shape{1, n};
}

std::vector<TensorType> infer_string_normalizer(InferContext& c) {
  check_shape(c);
  Normalizer norm(c.attrs(), c.label());
  if (norm.stops.empty()) return {TensorType(DType::String, result_shape(c.shape(0), c.shape(0).back()))};
  const Tensor& x = c.require_value(0, "StringNormalizer's input (the strings left after its stopwords set the shape)");
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) kept += !norm.is_stopword(x.strings()[i]);
  return {TensorType(DType::String, result_shape(c.shape(0), kept))};
}

void string_normalizer_kernel(KernelContext& ctx) {
  Normalizer norm(ctx.attrs, ctx.label);
  const Tensor& x = ctx.in(0);
  std::vector<std::string> kept;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!norm.is_stopword(x.strings()[i])) kept.push_back(norm.normalize(x.strings()[i]));
  Tensor& y = ctx.out();
  if (std::max<int64_t>(static_cast<int64_t>(kept.size()), 1) != y.numel())
    fail("{}: {} strings remain, but the result was inferred as {}", ctx.label, kept.size(), y.type().str());
  for (size_t i = 0; i < kept.size(); ++i) y.strings()[i] = kept[i];
}

}  // namespace

std::string change_case(const std::string& s, bool upper, const std::string& locale, const std::string& label) {
  locale_t loc = ctype_locale(locale, label);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const size_t at = i;
    if (!decode(s, i, cp)) fail("{}: the string \"{}\" is not valid UTF-8 (at byte {})", label, s, at);
    const wint_t w = upper ? towupper_l(static_cast<wint_t>(cp), loc) : towlower_l(static_cast<wint_t>(cp), loc);
    encode(static_cast<char32_t>(w), out);
  }
  return out;
}

void register_string_normalizer(OpRegistry& r) {
  OpDef d;
  d.name = "string_normalizer";
  d.category = OpCategory::Compute;
  d.takes_strings = true;
  d.attrs = {{"case_change_action", AttrKind::String},
             {"is_case_sensitive", AttrKind::Int},
             {"locale", AttrKind::String},
             {"stopwords", AttrKind::Strings}};
  d.infer = infer_string_normalizer;
  d.reference = string_normalizer_kernel;
  d.doc =
      "string[C'] or [1, C']: stopwords removed (case-insensitively unless is_case_sensitive), the rest upper- or "
      "lower-cased in the locale; one \"\" when nothing is left";
  r.add(std::move(d));
}

}  // namespace kiln::ops
