// The plan file's encoding (docs/plan_format.md): little-endian writers and
// bounds-checked readers, and one writer and reader per section. Internal to
// kiln_plan: runtime/plan_format.cpp assembles the sections into a file.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ir/error.h"
#include "runtime/plan_format.h"

namespace kiln::plan::detail {

inline uint64_t align_up(uint64_t v) { return (v + kAlignment - 1) / kAlignment * kAlignment; }

// Little-endian encoding (the hosts kiln supports are little-endian; the
// fields are copied byte for byte).
class Writer {
 public:
  std::vector<uint8_t> bytes;
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    // Grown then copied into: GCC 12 reads vector::insert of a few bytes
    // into a fresh vector as an overflow (-Wstringop-overflow, a false positive).
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  void str(std::string_view s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void blob(const std::vector<uint8_t>& b) {
    put<uint64_t>(b.size());
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  void pad_to(uint64_t alignment) { bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, 0); }
};

// Bounds-checked reads inside one section; every failure names the section.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, std::string what) : p_(p), n_(n), what_(std::move(what)) {}
  template <typename T>
  T get(std::string_view field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, p_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string str(std::string_view field) {
    uint64_t n = get<uint64_t>(field);
    need(n, field);
    std::string s(reinterpret_cast<const char*>(p_ + at_), n);
    at_ += n;
    return s;
  }
  std::vector<uint8_t> blob(std::string_view field) {
    uint64_t n = get<uint64_t>(field);
    need(n, field);
    std::vector<uint8_t> b(p_ + at_, p_ + at_ + n);
    at_ += n;
    return b;
  }
  // A count of items each at least `min_bytes` long: rejects counts the
  // remaining bytes cannot hold before anything is allocated.
  uint64_t count(std::string_view field, uint64_t min_bytes) {
    uint64_t n = get<uint64_t>(field);
    if (min_bytes && n > (n_ - at_) / min_bytes)
      fail("{}: {} is {} but only {} bytes remain", what_, field, n, n_ - at_);
    return n;
  }
  void seek(uint64_t at, std::string_view field) {
    if (at > n_) fail("{}: {} at offset {} is past the section's end ({} bytes)", what_, field, at, n_);
    at_ = at;
  }
  size_t pos() const { return at_; }
  size_t remaining() const { return n_ - at_; }
  size_t size() const { return n_; }
  const uint8_t* data() const { return p_; }
  void expect_end() const {
    if (at_ != n_) fail("{}: {} unexpected bytes after the last field", what_, n_ - at_);
  }
  const std::string& what() const { return what_; }

 private:
  void need(uint64_t n, std::string_view field) const {
    if (n > n_ - at_)
      fail("{}: truncated reading {}: needs {} bytes at offset {}, the section has {}", what_, field, n, at_, n_);
  }
  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
  std::string what_;
};

void put_type(Writer& w, const TensorType& t);
TensorType get_type(Reader& r);
std::vector<uint8_t> write_meta(const Meta& m);
Meta read_meta(Reader r, uint32_t version);
// The weights section up to its data: the table, padded to kAlignment. The
// section is these bytes followed by p.weight_data, which serialize copies
// straight into the file (a copy of the weights here cost a model's size in
// page touches).
std::vector<uint8_t> write_weights_table(const Plan& p);
void read_weights(Reader r, Plan& p);
std::vector<uint8_t> write_kernels(const std::vector<Kernel>& ks);
std::vector<Kernel> read_kernels(Reader r, uint32_t version);
std::vector<uint8_t> write_steps(const std::vector<Step>& steps);
std::vector<Step> read_steps(Reader r);
std::vector<uint8_t> write_memory(const Memory& m);
Memory read_memory(Reader r);
std::vector<uint8_t> write_resources(const Plan& p);
void read_resources(Reader r, Plan& p);
void check_steps(const Plan& p, std::string_view what);
// Section `control` (runtime/plan_control_section.cpp): the control-flow
// records, and their checks against the other sections and each other.
std::vector<uint8_t> write_control(const std::vector<ControlFlow>& cs);
std::vector<ControlFlow> read_control(Reader r);
void check_control(const Plan& p, std::string_view what);
// Fails unless `b` lies inside the buffer it names (weights, arena).
void check_binding(const Plan& p, const BufferRef& b, std::string_view what, std::string_view where);
// Section `profiles` (runtime/plan_profiles.h).
std::vector<uint8_t> write_profiles(const ShapeProfiles& s);
ShapeProfiles read_profiles(Reader r);
// Section `generic launches` (runtime/plan_generic_launches.h). The check:
// each launch names a kernel step of the top-level list, in increasing
// order, with 1..kMaxLaunchSymbols symbols, each one `declared` by the graph.
std::vector<uint8_t> write_generic_launches(const std::vector<GenericLaunch>& ls);
std::vector<GenericLaunch> read_generic_launches(Reader r);
void check_generic_launches(const Plan& p, const std::vector<std::string>& declared, std::string_view what);
// The same checks for any launch list's generic launches (`of` names the
// list in messages: " of launch variant 3").
void check_generic_list(const std::vector<GenericLaunch>& ls, const std::vector<Step>& steps,
                        const std::vector<std::string>& declared, std::string_view what, std::string_view of);
// Section `launch variants` (runtime/plan_launch_variants.h).
std::vector<uint8_t> write_launch_variants(const std::vector<LaunchVariant>& vs);
std::vector<LaunchVariant> read_launch_variants(Reader r);
void check_launch_variants(const Plan& p, const std::vector<std::string>& declared, std::string_view what);
// A polynomial of symbols (sections `profiles`, `generic launches`,
// `bounded sizes`): u64 term count; per term i64 coefficient, u64 symbol
// count and the names, sorted.
void put_poly(Writer& w, const DimPoly& poly);
DimPoly get_poly(Reader& r, std::string_view what);
// Section `bounded sizes` (runtime/plan_bounded_sizes.h).
std::vector<uint8_t> write_bounded_sizes(const BoundedSizes& s);
BoundedSizes read_bounded_sizes(Reader r);

}  // namespace kiln::plan::detail
