#include "ir/tensor_io.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "ir/error.h"
#include "ir/limits.h"

namespace kiln {

namespace {

const char* npy_descr(DType t) {
  switch (t) {
    case DType::F32:
      return "<f4";
    case DType::F16:
      return "<f2";
    case DType::F64:
      return "<f8";
    case DType::I8:
      return "|i1";
    case DType::I16:
      return "<i2";
    case DType::I32:
      return "<i4";
    case DType::I64:
      return "<i8";
    case DType::U8:
      return "|u1";
    case DType::U16:
      return "<u2";
    case DType::U32:
      return "<u4";
    case DType::U64:
      return "<u8";
    case DType::Bool:
      return "|b1";
    case DType::BF16:
      return nullptr;
    default:
      return nullptr;  // the low-bit types: numpy has no dtype for them (ml_dtypes is not numpy)
  }
  return nullptr;
}

// The header of a .npy file is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// Files come from strangers: it is parsed strictly (string keys; a string,
// True/False or a tuple of non-negative integers as values) and never
// evaluated, so object arrays are refused rather than unpickled.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : h_(text), path_(path) {}

  NpyHeader parse() {
    NpyHeader r;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!peek('}')) {
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        if (!peek('\'') && !peek('"'))
          fail("{}: .npy dtype is not a plain type (structured or object arrays are not supported)", path_);
        r.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        r.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        r.shape = shape();
        have_shape = true;
      } else {
        fail("{}: .npy header has an unknown key '{}'", path_, key);
      }
      if (!peek(',')) break;
      expect(',');
    }
    expect('}');
    skip_space();
    if (at_ != h_.size()) fail("{}: malformed .npy header: unexpected text after the dict", path_);
    if (!have_descr || !have_order || !have_shape)
      fail("{}: .npy header lacks '{}'", path_, !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    return r;
  }

 private:
  void skip_space() {
    while (at_ < h_.size() && std::isspace(static_cast<unsigned char>(h_[at_]))) ++at_;
  }
  bool peek(char c) {
    skip_space();
    return at_ < h_.size() && h_[at_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail("{}: malformed .npy header: expected '{}' at byte {}", path_, c, at_);
    ++at_;
  }
  std::string string_literal() {
    skip_space();
    if (at_ >= h_.size() || (h_[at_] != '\'' && h_[at_] != '"'))
      fail("{}: malformed .npy header: expected a quoted string at byte {}", path_, at_);
    char q = h_[at_++];
    size_t end = h_.find(q, at_);
    if (end == std::string::npos) fail("{}: malformed .npy header: unterminated string", path_);
    std::string r = h_.substr(at_, end - at_);
    at_ = end + 1;
    return r;
  }
  bool boolean() {
    skip_space();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (h_.compare(at_, std::strlen(word), word) == 0) {
        at_ += std::strlen(word);
        return value;
      }
    fail("{}: malformed .npy header: fortran_order is not True or False", path_);
  }
  // "(2, 3)", "(3,)", "()": each dim a plain non-negative integer that fits in int64.
  Shape shape() {
    expect('(');
    Shape s;
    while (!peek(')')) {
      size_t from = at_;
      while (at_ < h_.size() && h_[at_] != ',' && h_[at_] != ')') ++at_;
      std::string dim = h_.substr(from, at_ - from);
      size_t a = dim.find_first_not_of(" "), b = dim.find_last_not_of(" ");
      dim = a == std::string::npos ? "" : dim.substr(a, b - a + 1);
      if (!dim.empty() && dim[0] == '-') fail("{}: .npy shape has a negative dimension {}", path_, dim);
      bool digits = !dim.empty() && std::all_of(dim.begin(), dim.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) fail("{}: .npy shape dimension '{}' is not a non-negative integer", path_, dim);
      int64_t v = 0;
      auto [end, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), v);
      if (ec != std::errc() || end != dim.data() + dim.size())
        fail("{}: .npy shape dimension {} does not fit in 64 bits", path_, dim);
      s.push_back(v);
      if (!peek(',')) break;
      expect(',');
    }
    expect(')');
    return s;
  }

  const std::string& h_;
  const std::string& path_;
  size_t at_ = 0;
};

// The kiln dtype of a .npy descr, or a clear error.
DType npy_dtype(const std::string& descr, const std::string& path) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const char* d = npy_descr(DType(i));
    if (!d) continue;
    // '=' (native) and '<' both mean little-endian here; '|' single-byte.
    std::string alt = d;
    alt[0] = '=';
    if (descr == d || descr == alt) return DType(i);
  }
  if (descr.find('O') != std::string::npos)
    fail("{}: .npy holds Python objects (dtype '{}'); kiln reads numeric arrays only and never unpickles", path, descr);
  if (!descr.empty() && descr[0] == '>')
    fail("{}: .npy data is big-endian (dtype '{}'); save it little-endian (arr.astype(arr.dtype.newbyteorder('<')))",
         path, descr);
  fail("{}: .npy dtype '{}' is not supported (little-endian numeric or bool)", path, descr);
}

}  // namespace

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) fail("{}: not a .npy file", path);
  uint8_t major = uint8_t(bytes[6]);
  size_t hlen, at;
  if (major == 1) {
    hlen = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
    at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail("{}: truncated .npy header", path);
    uint32_t n;
    std::memcpy(&n, bytes.data() + 8, 4);
    hlen = n;
    at = 12;
  } else {
    fail("{}: .npy version {} is not supported", path, major);
  }
  if (hlen > bytes.size() - at) fail("{}: truncated .npy header", path);
  NpyHeader h = HeaderParser(bytes.substr(at, hlen), path).parse();
  at += hlen;
  DType dt = npy_dtype(h.descr, path);
  if (h.fortran_order) fail("{}: Fortran-order arrays are not supported; save np.ascontiguousarray(arr)", path);
  // Sized (overflow, the per-tensor limit) before anything is allocated.
  TensorType type(dt, h.shape);
  int64_t want = check_tensor_bytes(type, path);
  if (static_cast<int64_t>(bytes.size() - at) != want)
    fail("{}: {} needs {} data bytes, the file holds {}{}", path, type.str(), want, bytes.size() - at,
         static_cast<int64_t>(bytes.size() - at) < want ? " (truncated)" : "");
  Tensor t(dt, h.shape);
  if (want) std::memcpy(t.raw(), bytes.data() + at, static_cast<size_t>(want));
  return t;
}

void write_npy(const std::string& path, const Tensor& t) {
  const char* d = npy_descr(t.dtype());
  if (!d) fail("{}: {} has no NumPy dtype", path, dtype_name(t.dtype()));
  std::string shape;
  for (size_t i = 0; i < t.shape().size(); ++i) shape += std::to_string(t.shape()[i]) + ",";
  if (t.shape().size() > 1) shape.pop_back();
  std::string h = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", d, shape);
  size_t total = 10 + h.size() + 1;
  h += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("{}: cannot write", path);
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t n = uint16_t(h.size());
  out.write(reinterpret_cast<const char*>(&n), 2);
  out << h;
  out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  if (!out) fail("{}: write failed", path);
}

Tensor random_tensor(const TensorType& t, uint64_t seed, std::optional<ValueRange> range) {
  if (t.dtype == DType::String) fail("no random values for a string tensor");
  Tensor r(t.dtype, t.shape);
  ValueRange v = range ? *range : is_float(t.dtype) ? ValueRange{-1, 1} : ValueRange{0, 9};
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < r.numel(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    double u = double(s >> 11) / double(1ull << 53);
    if (is_float(t.dtype)) r.set_double(i, v.lo + u * (v.hi - v.lo));
    else if (t.dtype == DType::Bool) r.set_int(i, u < 0.5);
    else r.set_int(i, std::min(int64_t(v.hi), int64_t(v.lo) + int64_t(u * (v.hi - v.lo + 1))));  // u*span may round up
  }
  return r;
}

uint64_t tensor_checksum(const Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  if (t.dtype() == DType::String) {  // each string's characters, then a 0xff no UTF-8 text holds
    for (int64_t i = 0; i < t.numel(); ++i) {
      for (unsigned char c : t.strings()[i]) h = (h ^ c) * 1099511628211ull;
      h = (h ^ 0xffu) * 1099511628211ull;
    }
    return h;
  }
  for (uint8_t c : t.bytes()) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace kiln
