#include "frontend/tensor_proto.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "frontend/safe_path.h"
#include "ir/error.h"
#include "ir/short_name.h"
#include "ir/limits.h"
#include "ir/low_bit.h"

namespace kiln {

DType dtype_from_onnx(int elem_type, const std::string& context) {
  using TP = onnx::TensorProto;
  switch (elem_type) {
    case TP::FLOAT:
      return DType::F32;
    case TP::FLOAT16:
      return DType::F16;
    case TP::BFLOAT16:
      return DType::BF16;
    case TP::DOUBLE:
      return DType::F64;
    case TP::INT8:
      return DType::I8;
    case TP::INT16:
      return DType::I16;
    case TP::INT32:
      return DType::I32;
    case TP::INT64:
      return DType::I64;
    case TP::UINT8:
      return DType::U8;
    case TP::UINT16:
      return DType::U16;
    case TP::UINT32:
      return DType::U32;
    case TP::UINT64:
      return DType::U64;
    case TP::BOOL:
      return DType::Bool;
    case TP::STRING:
      return DType::String;
    case TP::COMPLEX64:
    case TP::COMPLEX128:
      unsupported("{}: complex tensors are not supported", context);
    case TP::UNDEFINED:
      fail("{}: tensor element type is undefined", context);
    default: {
      // Types newer than Debian's onnx.proto knows, by their onnx 1.23 numbers.
      if (std::optional<DType> t = low_bit_dtype_from_onnx(elem_type)) return *t;
      static const char* const low_bit[] = {"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
                                            "uint4",        "int4",           "float4e2m1", "float8e8m0",
                                            "uint2",        "int2",           "float6e2m3", "float6e3m2"};
      if (elem_type >= 17 && elem_type <= 28)
        unsupported("{}: tensor element type {} ({}) is not supported", context, low_bit[elem_type - 17], elem_type);
      unsupported("{}: tensor element type {} is not supported", context, elem_type);
    }
  }
}

int dtype_to_onnx(DType t) {
  using TP = onnx::TensorProto;
  switch (t) {
    case DType::F32:
      return TP::FLOAT;
    case DType::F16:
      return TP::FLOAT16;
    case DType::BF16:
      return TP::BFLOAT16;
    case DType::F64:
      return TP::DOUBLE;
    case DType::I8:
      return TP::INT8;
    case DType::I16:
      return TP::INT16;
    case DType::I32:
      return TP::INT32;
    case DType::I64:
      return TP::INT64;
    case DType::U8:
      return TP::UINT8;
    case DType::U16:
      return TP::UINT16;
    case DType::U32:
      return TP::UINT32;
    case DType::U64:
      return TP::UINT64;
    case DType::Bool:
      return TP::BOOL;
    case DType::String:
      return TP::STRING;
    default:
      return low_bit_dtype_to_onnx(t);
  }
}

namespace {

// ONNX's numbers for the low-bit types (onnx.proto's TensorProto.DataType;
// Debian's older onnx_pb.h has no names for them).
constexpr std::pair<int, DType> kLowBitOnnx[] = {
    {17, DType::F8E4M3FN}, {18, DType::F8E4M3FNUZ}, {19, DType::F8E5M2}, {20, DType::F8E5M2FNUZ}, {21, DType::U4},
    {22, DType::I4},       {23, DType::F4E2M1},     {24, DType::F8E8M0}, {25, DType::U2},         {26, DType::I2},
};

}  // namespace

std::optional<DType> low_bit_dtype_from_onnx(int elem_type) {
  for (auto [n, t] : kLowBitOnnx)
    if (n == elem_type) return t;
  return std::nullopt;
}

int low_bit_dtype_to_onnx(DType t) {
  for (auto [n, d] : kLowBitOnnx)
    if (d == t) return n;
  return 0;
}

namespace {

// The typed field a dtype's values travel in (when not raw or external), and
// how many values it holds: checked against the shape before allocating.
const char* typed_field(const onnx::TensorProto& p, DType dt, int64_t* count) {
  switch (dt) {
    case DType::F32:
      *count = p.float_data_size();
      return "float_data";
    case DType::F64:
      *count = p.double_data_size();
      return "double_data";
    case DType::I64:
      *count = p.int64_data_size();
      return "int64_data";
    case DType::U32:
    case DType::U64:
      *count = p.uint64_data_size();
      return "uint64_data";
    default:
      *count = p.int32_data_size();
      return "int32_data";  // 16-bit floats as bit patterns, ints, bool
  }
}

// Copies a typed field's values into t (counts already checked).
template <typename Field>
void from_field(const Field& f, Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    if constexpr (std::is_floating_point_v<typename Field::value_type>) t.set_double(i, f.Get(i));
    else t.set_int(i, static_cast<int64_t>(f.Get(i)));
  }
}

Tensor read_external(const onnx::TensorProto& p, const TensorType& type, const std::string& base_dir,
                     const std::string& ctx) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset" || kv.key() == "length") {
      int64_t v = 0;
      try {
        size_t used = 0;
        v = std::stoll(kv.value(), &used);
        if (used != kv.value().size()) throw std::invalid_argument("");
      } catch (...) {
        fail("{}: external data {} '{}' is not an integer", ctx, kv.key(), kv.value());
      }
      if (v < 0) fail("{}: external data {} {} is negative", ctx, kv.key(), v);
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) fail("{}: external data has no location", ctx);
  // A model given as bytes (standard input, kiln_compile_memory without a
  // folder) has nothing to resolve "location" against.
  if (base_dir.empty())
    fail(
        "{}: its data is in the external file \"{}\", and this model has no folder to find it in (it was given as "
        "bytes: standard input or memory); give the model's file path instead",
        ctx, short_name(location));
  std::string path = resolve_external_data_path(base_dir, location, ctx);
  // Opened without following a symlink and measured on the open file, so a
  // path swapped after resolve_external_data_path's checks is not read.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open external data file '{}'", ctx, location);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    fail("{}: external data '{}' is not a regular file", ctx, location);
  int64_t size = st.st_size;
  int64_t want = static_cast<int64_t>(type.nbytes());
  if (length >= 0 && length != want)
    fail("{}: external data length {} does not match {} bytes for {}", ctx, length, want, type.str());
  if (offset > size || want > size - offset)
    fail("{}: external data '{}' range [{}, {}+{}) lies outside the file ({} bytes)", ctx, location, offset, offset,
         want, size);
  Tensor t(type);  // allocated only once the file is known to hold the bytes
  auto* dst = static_cast<char*>(t.raw());
  for (int64_t done = 0; done < want;) {
    ssize_t n = ::pread(fd, dst + done, static_cast<size_t>(std::min<int64_t>(want - done, int64_t(1) << 30)),
                        static_cast<off_t>(offset + done));
    if (n <= 0) fail("{}: reading external data '{}' failed", ctx, location);
    done += n;
  }
  return t;
}

// The fields that hold a tensor's values, as ONNX allows exactly one: two
// (raw_data and float_data, say) would leave it to the reader which one
// counts, and the ONNX checker rejects such a tensor. External data must come
// without any in-file values.
void check_one_storage(const onnx::TensorProto& p, const std::string& ctx) {
  std::vector<const char*> fields;
  if (p.has_raw_data()) fields.push_back("raw_data");
  if (p.float_data_size()) fields.push_back("float_data");
  if (p.int32_data_size()) fields.push_back("int32_data");
  if (p.string_data_size()) fields.push_back("string_data");
  if (p.int64_data_size()) fields.push_back("int64_data");
  if (p.double_data_size()) fields.push_back("double_data");
  if (p.uint64_data_size()) fields.push_back("uint64_data");
  if (p.data_location() == onnx::TensorProto::EXTERNAL && !fields.empty())
    fail("{}: the data is stored externally but the tensor also holds {}", ctx, fields[0]);
  if (fields.size() > 1)
    fail("{}: the tensor holds its values twice ({} and {}); ONNX allows one data field", ctx, fields[0], fields[1]);
}

// A low-bit tensor: raw_data (or external data) holds the packed bytes;
// int32_data one packed byte per value for the sub-byte types, one code per
// value for the 8-bit floats (as onnx.helper.make_tensor writes them).
Tensor low_bit_from_proto(const onnx::TensorProto& p, const TensorType& type, const std::string& base_dir,
                          const std::string& ctx) {
  const DType dt = type.dtype;
  const int64_t numel = type.numel();
  const int64_t want = packed_low_bit_bytes(dt, numel);
  std::string bytes;
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    Tensor packed = read_external(p, TensorType(DType::U8, {want}), base_dir, ctx);
    bytes.assign(static_cast<const char*>(packed.raw()), static_cast<size_t>(want));
  } else if (p.has_raw_data()) {
    if (static_cast<int64_t>(p.raw_data().size()) != want)
      fail("{}: raw_data has {} bytes but {} (packed {} bits per value) needs {}", ctx, p.raw_data().size(), type.str(),
           low_bit_width(dt), want);
    bytes = p.raw_data();
  } else {
    if (numel != 0 && p.int32_data_size() != want)
      fail("{}: int32_data holds {} values but {} needs {} (packed {} bits per value)", ctx, p.int32_data_size(),
           type.str(), want, low_bit_width(dt));
    bytes.resize(static_cast<size_t>(numel == 0 ? 0 : want));
    for (int64_t i = 0; i < static_cast<int64_t>(bytes.size()); ++i) {
      int32_t v = p.int32_data(static_cast<int>(i));
      if (v < 0 || v > 255) fail("{}: int32_data[{}] = {} is not a byte of {} data", ctx, i, v, dtype_name(dt));
      bytes[i] = static_cast<char>(v);
    }
  }
  Tensor t(type);
  if (numel) unpack_low_bit(dt, reinterpret_cast<const uint8_t*>(bytes.data()), numel, static_cast<uint8_t*>(t.raw()));
  return t;
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir, const std::string& ctx) {
  if (p.has_segment()) unsupported("{}: segmented tensors are not supported", ctx);
  check_one_storage(p, ctx);
  DType dt = dtype_from_onnx(p.data_type(), ctx);
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape)
    if (d < 0) fail("{}: negative dimension {}", ctx, d);
  // Sizes are checked (overflow, the per-tensor limit) before allocating.
  int64_t numel = check_tensor_bytes(TensorType(dt, shape), ctx) / int64_t(dtype_size(dt));
  if (is_low_bit(dt)) return low_bit_from_proto(p, TensorType(dt, shape), base_dir, ctx);
  if (dt == DType::String) {  // ONNX keeps strings in string_data only (bytes, UTF-8 by convention)
    if (p.has_raw_data() || p.data_location() == onnx::TensorProto::EXTERNAL)
      fail("{}: a string tensor must hold its values in string_data, not raw or external data", ctx);
    if (p.string_data_size() != numel)
      fail("{}: string_data holds {} values but the shape [{}] needs {}", ctx, p.string_data_size(),
           fmt::join(shape, ","), numel);
    Tensor t(dt, shape);
    for (int64_t i = 0; i < numel; ++i) t.strings()[i] = p.string_data(static_cast<int>(i));
    return t;
  }
  if (p.data_location() == onnx::TensorProto::EXTERNAL) return read_external(p, TensorType(dt, shape), base_dir, ctx);
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    int64_t want = numel * int64_t(dtype_size(dt));
    if (static_cast<int64_t>(raw.size()) != want)
      fail("{}: raw_data has {} bytes but {}[{}] needs {}", ctx, raw.size(), dtype_name(dt), fmt::join(shape, ","),
           want);
    Tensor t(dt, shape);
    if (want) std::memcpy(t.raw(), raw.data(), want);  // ONNX raw data is little-endian, as is the host
    return t;
  }
  int64_t have = 0;
  const char* field = typed_field(p, dt, &have);
  if (numel != 0 && have != numel)
    fail("{}: {} holds {} values but the shape [{}] needs {}", ctx, field, have, fmt::join(shape, ","), numel);
  Tensor t(dt, shape);
  if (numel == 0) return t;
  switch (dt) {
    case DType::F32:
      from_field(p.float_data(), t);
      break;
    case DType::F64:
      from_field(p.double_data(), t);
      break;
    case DType::I64:
      from_field(p.int64_data(), t);
      break;
    case DType::U32:
    case DType::U64:
      from_field(p.uint64_data(), t);
      break;
    case DType::F16:
    case DType::BF16: {
      // 16-bit floats travel as their bit patterns in int32_data.
      auto* d = t.data<uint16_t>();
      for (int64_t i = 0; i < numel; ++i) d[i] = static_cast<uint16_t>(p.int32_data(i));
      break;
    }
    default:
      from_field(p.int32_data(), t);
      break;
  }
  return t;
}

onnx::TensorProto tensor_to_proto(const Tensor& t, const std::string& name) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.shape()) p.add_dims(d);
  if (is_low_bit(t.dtype())) {  // packed as ONNX stores sub-byte types
    std::string packed(static_cast<size_t>(packed_low_bit_bytes(t.dtype(), t.numel())), '\0');
    pack_low_bit(t.dtype(), static_cast<const uint8_t*>(t.raw()), t.numel(), reinterpret_cast<uint8_t*>(packed.data()));
    p.set_raw_data(std::move(packed));
    return p;
  }
  if (t.dtype() == DType::String) {
    for (int64_t i = 0; i < t.numel(); ++i) p.add_string_data(t.strings()[i]);
    return p;
  }
  p.set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
  return p;
}

Tensor read_tensor_pb(const std::string& path, std::string* name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  onnx::TensorProto p;
  if (!p.ParseFromIstream(&in)) fail("{}: not a valid TensorProto", path);
  if (name) *name = p.name();
  std::string dir = std::filesystem::path(path).parent_path().string();
  return tensor_from_proto(p, dir, path);
}

}  // namespace kiln
