// The DLPack exchange structs (https://dmlc.github.io/dlpack/latest/c_api.html),
// declared here from the specification's ABI: the layouts and enum values are
// fixed by it (versions 0.x for DLManagedTensor, 1.x for the versioned form).
// Debian's libdlpack-dev is 0.6, which has no DLManagedTensorVersioned, the
// form numpy >= 2.1 and torch >= 2.9 hand out when asked with max_version.
// Only what the importer (dlpack_import.cpp) reads is declared.
#pragma once
#include <cstdint>

namespace kiln_dlpack {

enum DeviceType : int32_t {
  kCPU = 1,
  kCUDA = 2,
  kCUDAHost = 3,  // pinned host memory
  kCUDAManaged = 13,
};

struct Device {
  int32_t device_type;
  int32_t device_id;
};

enum TypeCode : uint8_t {
  kInt = 0,
  kUInt = 1,
  kFloat = 2,
  kBfloat = 4,
  kComplex = 5,
  kBool = 6,
  kFloat8_e4m3fn = 10,
  kFloat8_e4m3fnuz = 11,
  kFloat8_e5m2 = 12,
  kFloat8_e5m2fnuz = 13,
  kFloat8_e8m0fnu = 14,
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: C-contiguous
  uint64_t byte_offset;
};

// The unversioned form (capsule name "dltensor").
struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

struct PackVersion {
  uint32_t major;
  uint32_t minor;
};

// The versioned form, DLPack >= 1.0 (capsule name "dltensor_versioned").
struct ManagedTensorVersioned {
  PackVersion version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  Tensor dl_tensor;
};

constexpr uint64_t kFlagReadOnly = 1u << 0;
constexpr uint64_t kFlagIsCopied = 1u << 1;
constexpr uint32_t kMajorVersion = 1;  // the major version this importer reads

}  // namespace kiln_dlpack
