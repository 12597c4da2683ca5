#include "tools/kiln/tensor_io.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "ir/error.h"

namespace kiln {

namespace {

const char* npy_descr(DType t) {
  switch (t) {
    case DType::F32: return "<f4";
    case DType::F16: return "<f2";
    case DType::F64: return "<f8";
    case DType::I8: return "|i1";
    case DType::I16: return "<i2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::U8: return "|u1";
    case DType::U16: return "<u2";
    case DType::U32: return "<u4";
    case DType::U64: return "<u8";
    case DType::Bool: return "|b1";
    case DType::BF16: return nullptr;
  }
  return nullptr;
}

// The value of 'key' in the header dict, as raw text up to the next top-level comma.
std::string dict_value(const std::string& h, const std::string& key, const std::string& path) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) fail("{}: .npy header has no '{}'", path, key);
  size_t c = h.find(':', k);
  if (c == std::string::npos) fail("{}: malformed .npy header", path);
  size_t s = c + 1, depth = 0, e = s;
  for (; e < h.size(); ++e) {
    if (h[e] == '(') ++depth;
    if (h[e] == ')') --depth;
    if ((h[e] == ',' || h[e] == '}') && depth == 0) break;
  }
  std::string v = h.substr(s, e - s);
  size_t a = v.find_first_not_of(" "), b = v.find_last_not_of(" ");
  return a == std::string::npos ? "" : v.substr(a, b - a + 1);
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
  std::string h = bytes.substr(at, hlen);
  at += hlen;
  std::string descr = dict_value(h, "descr", path);
  if (descr.size() < 2) fail("{}: bad descr {}", path, descr);
  descr = descr.substr(1, descr.size() - 2);
  if (dict_value(h, "fortran_order", path) != "False") fail("{}: Fortran-order arrays are not supported", path);
  std::optional<DType> dt;
  for (int i = 0; i < kNumDTypes; ++i) {
    const char* d = npy_descr(DType(i));
    if (!d) continue;
    // '=' and '<' both mean little-endian here; '|' single-byte.
    std::string alt = d;
    alt[0] = '=';
    if (descr == d || descr == alt) dt = DType(i);
  }
  if (!dt) fail("{}: .npy dtype '{}' is not supported (little-endian numeric or bool)", path, descr);
  std::string shape_text = dict_value(h, "shape", path);
  Shape shape;
  std::string num;
  for (char c : shape_text) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      num += c;
    } else if (!num.empty()) {
      shape.push_back(std::stoll(num));
      num.clear();
    }
  }
  Tensor t(*dt, shape);
  if (t.nbytes() != bytes.size() - at)
    fail("{}: {} holds {} data bytes, expected {}", path, t.type().str(), bytes.size() - at, t.nbytes());
  if (t.nbytes()) std::memcpy(t.raw(), bytes.data() + at, t.nbytes());
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
  for (uint8_t c : t.bytes()) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace kiln
