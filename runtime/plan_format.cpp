#include "runtime/plan_format.h"

#include <algorithm>
#include <functional>

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>

#include "ir/error.h"
#include "ir/file_io.h"
#include "runtime/plan_in_place.h"
#include "runtime/plan_sections.h"
#include "runtime/version.h"

namespace kiln::plan {

using namespace detail;

namespace {

enum SectionId : uint32_t {
  kMeta = 1,
  kGraph = 2,
  kWeights = 3,
  kKernels = 4,
  kLaunches = 5,
  kMemory = 6,
  kResources = 7,         // optional: a plan without it loads with the fields it holds unknown (-1)
  kControl = 8,           // only in plans with control flow (then required by their control steps)
  kProfiles = 9,          // only in a plan with symbolic dims (runtime/plan_profiles.h)
  kGenericLaunches = 10,  // only in a GPU plan with symbolic dims (runtime/plan_generic_launches.h)
  kBoundedSizes = 11,     // only in a GPU plan with data-dependent sizes (runtime/plan_bounded_sizes.h)
  kInPlaceAppends = 13,   // only in a GPU plan with profiles and KV cache pairs (runtime/plan_in_place.h)
  kLaunchVariants = 12,   // only in a GPU plan with specialised launches (runtime/plan_launch_variants.h)
};
constexpr uint32_t kSectionIds[] = {kMeta, kGraph, kWeights, kKernels, kLaunches, kMemory};  // required
constexpr size_t kFixedHeader = 40;  // magic 8, version 4, header size 4, file size 8, count 4, pad 4, xxh64 8
constexpr size_t kTableEntry = 32;   // id 4, pad 4, offset 8, size 8, xxh64 8
constexpr size_t kChecksumAt = 32;   // offset of the header checksum

}  // namespace

std::string section_name(uint32_t id) {
  switch (id) {
    case kMeta:
      return "meta";
    case kGraph:
      return "graph";
    case kWeights:
      return "weights";
    case kKernels:
      return "kernels";
    case kLaunches:
      return "launches";
    case kMemory:
      return "memory";
    case kResources:
      return "resources";
    case kControl:
      return "control";
    case kProfiles:
      return "profiles";
    case kGenericLaunches:
      return "generic launches";
    case kBoundedSizes:
      return "bounded sizes";
    case kInPlaceAppends:
      return "in-place appends";
    case kLaunchVariants:
      return "launch variants";
  }
  return fmt::format("#{}", id);
}

namespace {

// One section's bytes: `head`, then `tail` when set (the weights' data,
// which is not copied into `head`).
struct Section {
  uint32_t id;
  std::vector<uint8_t> head;
  const std::vector<uint8_t>* tail = nullptr;
  uint64_t size() const { return head.size() + (tail ? tail->size() : 0); }
  uint64_t checksum() const {
    if (!tail) return XXH64(head.data(), head.size(), 0);
    XXH64_state_t* st = XXH64_createState();
    KILN_CHECK(st, "plan: no memory for a checksum state");
    XXH64_reset(st, 0);
    XXH64_update(st, head.data(), head.size());
    XXH64_update(st, tail->data(), tail->size());
    uint64_t h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
  }
};

}  // namespace

void write_plan(const Plan& p, const std::function<void(const void*, size_t)>& sink,
                const std::function<void(uint64_t)>& file_size_known) {
  std::vector<Section> sections;
  sections.push_back({kMeta, write_meta(p.meta)});
  sections.push_back({kGraph, std::vector<uint8_t>(p.graph_text.begin(), p.graph_text.end())});
  sections.push_back({kWeights, write_weights_table(p), &p.weight_data});
  sections.push_back({kKernels, write_kernels(p.kernels)});
  sections.push_back({kLaunches, write_steps(p.steps)});
  sections.push_back({kMemory, write_memory(p.memory)});
  sections.push_back({kResources, write_resources(p)});
  if (!p.control.empty()) sections.push_back({kControl, write_control(p.control)});
  // A static plan has none, so its bytes are what they were before profiles.
  if (!p.shapes.empty()) sections.push_back({kProfiles, write_profiles(p.shapes)});
  if (!p.generic_launches.empty()) sections.push_back({kGenericLaunches, write_generic_launches(p.generic_launches)});
  if (!p.bounded_sizes.empty()) sections.push_back({kBoundedSizes, write_bounded_sizes(p.bounded_sizes)});
  if (!p.launch_variants.empty()) sections.push_back({kLaunchVariants, write_launch_variants(p.launch_variants)});
  if (!p.in_place_appends.empty()) sections.push_back({kInPlaceAppends, write_in_place_appends(p.in_place_appends)});

  uint64_t header_size = kFixedHeader + kTableEntry * sections.size();
  std::vector<uint64_t> offsets;
  uint64_t at = align_up(header_size);
  for (const Section& sec : sections) {
    offsets.push_back(at);
    at = align_up(at + sec.size());
  }
  uint64_t file_size = at;

  Writer h;
  h.bytes.insert(h.bytes.end(), kMagic, kMagic + 8);
  h.put<uint32_t>(kFormatVersion);
  h.put<uint32_t>(static_cast<uint32_t>(header_size));
  h.put<uint64_t>(file_size);
  h.put<uint32_t>(static_cast<uint32_t>(sections.size()));
  h.put<uint32_t>(0);
  h.put<uint64_t>(0);  // header checksum, filled below
  for (size_t i = 0; i < sections.size(); ++i) {
    h.put<uint32_t>(sections[i].id);
    h.put<uint32_t>(0);
    h.put<uint64_t>(offsets[i]);
    h.put<uint64_t>(sections[i].size());
    h.put<uint64_t>(sections[i].checksum());
  }
  uint64_t sum = XXH64(h.bytes.data(), h.bytes.size(), 0);
  std::memcpy(h.bytes.data() + kChecksumAt, &sum, 8);

  // In file order, zeros between the sections: no image of the whole file
  // (a plan's weights are not held once more to be written).
  static const uint8_t kZeros[64] = {};
  uint64_t written = 0;
  auto pad_to = [&](uint64_t at) {
    while (written < at) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(at - written, sizeof kZeros));
      sink(kZeros, n);
      written += n;
    }
  };
  if (file_size_known) file_size_known(file_size);
  sink(h.bytes.data(), h.bytes.size());
  written = h.bytes.size();
  for (size_t i = 0; i < sections.size(); ++i) {
    const Section& sec = sections[i];
    pad_to(offsets[i]);
    if (!sec.head.empty()) sink(sec.head.data(), sec.head.size());
    if (sec.tail && !sec.tail->empty()) sink(sec.tail->data(), sec.tail->size());
    written += sec.size();
  }
  pad_to(file_size);
}

std::vector<uint8_t> serialize(const Plan& p) {
  std::vector<uint8_t> out;
  write_plan(
      p,
      [&out](const void* data, size_t n) {
        const auto* b = static_cast<const uint8_t*>(data);
        out.insert(out.end(), b, b + n);
      },
      [&out](uint64_t size) { out.reserve(size); });
  return out;
}

Plan deserialize(const uint8_t* data, size_t size, std::string_view what, const LoadOptions& opts) {
  if (size < kFixedHeader) fail("{}: truncated: {} bytes, a plan header needs {}", what, size, kFixedHeader);
  if (std::memcmp(data, kMagic, 8) != 0) {
    std::string found;
    for (int i = 0; i < 8; ++i) found += (data[i] >= 32 && data[i] < 127) ? char(data[i]) : '?';
    fail("{}: not a kiln plan: magic is '{}', expected 'KILNPLAN'", what, found);
  }
  Reader h(data, size, std::string(what) + ": header");
  h.seek(8, "version");
  uint32_t version = h.get<uint32_t>("format version");
  if (version < kOldestFormatVersion || version > kFormatVersion)
    fail("{}: plan format version {}, this runtime reads versions {} to {} (recompile the model with this kiln)", what,
         version, kOldestFormatVersion, kFormatVersion);
  uint32_t header_size = h.get<uint32_t>("header size");
  uint64_t file_size = h.get<uint64_t>("file size");
  uint32_t count = h.get<uint32_t>("section count");
  if (file_size != size)
    fail("{}: {}: the header says the plan has {} bytes, found {}", what,
         size < file_size ? "truncated" : "trailing bytes", file_size, size);
  if (count > 64 || header_size != kFixedHeader + kTableEntry * count || header_size > size)
    fail("{}: corrupt header: {} sections in a {}-byte header (expected {} bytes)", what, count, header_size,
         kFixedHeader + kTableEntry * uint64_t(count));
  {
    std::vector<uint8_t> hdr(data, data + header_size);
    uint64_t stored;
    std::memcpy(&stored, hdr.data() + kChecksumAt, 8);
    std::memset(hdr.data() + kChecksumAt, 0, 8);
    uint64_t actual = XXH64(hdr.data(), hdr.size(), 0);
    if (actual != stored) fail("{}: corrupt header: xxh64 is {:016x}, expected {:016x}", what, actual, stored);
  }
  h.seek(kFixedHeader, "section table");
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> where;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t id = h.get<uint32_t>("section id");
    h.get<uint32_t>("reserved");
    uint64_t off = h.get<uint64_t>("section offset");
    uint64_t n = h.get<uint64_t>("section size");
    uint64_t sum = h.get<uint64_t>("section checksum");
    std::string name = section_name(id);
    if (off < header_size || off > size || n > size - off)
      fail("{}: section '{}' ({} bytes at offset {}) is outside the {}-byte file", what, name, n, off, size);
    uint64_t actual = XXH64(data + off, n, 0);
    if (actual != sum) fail("{}: section '{}' is corrupt: xxh64 is {:016x}, expected {:016x}", what, name, actual, sum);
    if (!where.emplace(id, std::make_pair(off, n)).second) fail("{}: section '{}' appears twice", what, name);
  }
  for (uint32_t id : kSectionIds)
    if (!where.count(id)) fail("{}: section '{}' is missing", what, section_name(id));
  auto reader = [&](uint32_t id) {
    auto [off, n] = where.at(id);
    return Reader(data + off, n, fmt::format("{}: section '{}'", what, section_name(id)));
  };

  Plan p;
  p.format_version = version;
  p.meta = read_meta(reader(kMeta), version);
  // A plan holds code generated by one kiln for its own runtime: another
  // version's kernels, launch list or graph text may mean something else.
  if (p.meta.kiln_version != kKilnVersion)
    fail("{}: the plan was built by kiln {}, this runtime is kiln {} (recompile the model with this kiln)", what,
         p.meta.kiln_version, kKilnVersion);
  {
    auto [off, n] = where.at(kGraph);
    p.graph_text.assign(reinterpret_cast<const char*>(data + off), n);
  }
  read_weights(reader(kWeights), p);
  p.kernels = read_kernels(reader(kKernels), version);
  p.steps = read_steps(reader(kLaunches));
  p.memory = read_memory(reader(kMemory));
  if (where.count(kResources)) read_resources(reader(kResources), p);
  if (where.count(kControl)) p.control = read_control(reader(kControl));
  if (where.count(kProfiles)) {
    p.shapes = read_profiles(reader(kProfiles));
    if (p.shapes.value_bytes.size() != p.memory.values.size())
      fail("{}: section 'profiles' has {} result sizes, the memory plan has {} results", what,
           p.shapes.value_bytes.size(), p.memory.values.size());
  }
  if (where.count(kGenericLaunches)) {
    if (p.shapes.empty()) fail("{}: section 'generic launches' in a plan without shape profiles", what);
    p.generic_launches = read_generic_launches(reader(kGenericLaunches));
  }
  if (where.count(kInPlaceAppends)) {
    if (p.shapes.empty()) fail("{}: section 'in-place appends' in a plan without shape profiles", what);
    p.in_place_appends = read_in_place_appends(reader(kInPlaceAppends));
  }
  if (where.count(kBoundedSizes)) {
    p.bounded_sizes = read_bounded_sizes(reader(kBoundedSizes));
    if (p.bounded_sizes.empty()) fail("{}: section 'bounded sizes' has no counts", what);
  }
  if (where.count(kLaunchVariants)) {
    if (p.generic_launches.empty()) fail("{}: section 'launch variants' in a plan without generic launches", what);
    p.launch_variants = read_launch_variants(reader(kLaunchVariants));
    if (p.launch_variants.empty()) fail("{}: section 'launch variants' has no variants", what);
  }
  check_steps(p, what);
  check_control(p, what);
  if (p.meta.graph_constants > p.weights.size())
    fail("{}: meta says {} graph constants, the weights section has {} entries", what, p.meta.graph_constants,
         p.weights.size());
  if (!opts.device_arch.empty() && p.meta.gpu_kernels) (void)select_code(p, opts.device_arch, what);
  return p;
}

namespace {
int arch_number(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return -1;
  try {
    return std::stoi(arch.substr(3));
  } catch (...) {
    return -1;
  }
}
}  // namespace

namespace {
void collect_steps(const Plan& p, const std::vector<Step>& steps, const std::string& where, std::vector<StepAt>& out) {
  for (const Step& s : steps) out.push_back({&s, where});
  for (const Step& s : steps) {
    if (s.kind != StepKind::Control || s.kernel >= p.control.size()) continue;
    const ControlFlow& c = p.control[s.kernel];
    for (size_t r = 0; r < c.regions.size(); ++r)
      collect_steps(p, c.regions[r].steps,
                    fmt::format("{}{}control {} region {}", where, where.empty() ? "" : ", ", s.kernel, r), out);
  }
}
}  // namespace

std::vector<StepAt> all_steps(const Plan& p) {
  std::vector<StepAt> out;
  collect_steps(p, p.steps, "", out);
  for (size_t i = 0; i < p.in_place_appends.size(); ++i)
    out.push_back({&p.in_place_appends[i].append, fmt::format("in-place append {}", i)});
  return out;
}

std::string CodeChoice::describe() const { return kind == "cubin" ? "CUBIN " + arch : "PTX JIT from " + arch; }

namespace {
// The CUBIN of `k` for `arch`, or null.
const std::vector<uint8_t>* cubin_for(const Kernel& k, const std::string& arch) {
  if (k.arch == arch && !k.cubin.empty()) return &k.cubin;
  for (const ArchCubin& c : k.more_cubins)
    if (c.arch == arch && !c.image.empty()) return &c.image;
  return nullptr;
}
}  // namespace

CodeChoice select_code(const Plan& p, const std::string& device_arch, std::string_view what) {
  if (!p.meta.gpu_kernels) fail("{}: the plan has no GPU kernels ({})", what, p.meta.no_gpu_reason);
  int dev = arch_number(device_arch);
  if (dev < 0) fail("{}: '{}' is not a GPU arch (expected sm_XX)", what, device_arch);
  // Candidate CUBIN archs, best first: the GPU's own, then the same major
  // arch's older minors, newest first.
  // An arch-specific CUBIN (sm_90a: kiln's wgmma kernels) runs on its exact
  // arch only (CUDA C Programming Guide, "Feature Set Compiler Targets").
  std::vector<std::string> candidates;
  if (device_arch == "sm_90") candidates.push_back("sm_90a");
  for (int minor = dev % 10; minor >= 0; --minor) candidates.push_back(fmt::format("sm_{}", dev / 10 * 10 + minor));
  // A plan whose launch list is only copies has no code to choose.
  if (p.kernels.empty()) return {"cubin", device_arch, p.meta.cubin_driver_version};
  for (const std::string& arch : candidates) {
    bool all = true;
    for (const Kernel& k : p.kernels) all &= cubin_for(k, arch) != nullptr;
    if (all) return {"cubin", arch, p.meta.cubin_driver_version};
  }
  bool all_ptx = true;
  for (const Kernel& k : p.kernels) {
    int ka = arch_number(k.arch);
    // PTX for sm_X JITs on any GPU of arch >= X; for an arch-specific sm_Xa (compute_Xa) only on X.
    const bool specific = !k.arch.empty() && k.arch.back() == 'a';
    all_ptx &= !k.ptx.empty() && ka >= 0 && (specific ? ka == dev : ka <= dev);
  }
  if (all_ptx) return {"ptx", p.kernels.front().arch, p.meta.ptx_driver_version};
  fail(
      "{}: wrong GPU arch: the plan's kernels are for {}, this GPU is {} (a CUBIN runs on its own major arch, PTX "
      "JIT only on the same or a newer arch; recompile with --target {})",
      what, fmt::join(p.meta.archs, ","), device_arch, device_arch);
}

const void* code_image(const Kernel& k, const CodeChoice& c) {
  if (c.kind == "ptx") return k.ptx.c_str();
  const std::vector<uint8_t>* b = cubin_for(k, c.arch);
  KILN_CHECK(b, "kernel {} has no CUBIN for {}", k.name, c.arch);
  return b->data();
}

std::string driver_version_name(int32_t version) { return fmt::format("{}.{}", version / 1000, (version % 1000) / 10); }

int32_t ptx_driver_version(const std::string& ptx) {
  size_t v = ptx.find(".version ");
  int major = 0, minor = 0;
  if (v == std::string::npos || std::sscanf(ptx.c_str() + v, ".version %d.%d", &major, &minor) != 2) return 0;
  // PTX ISA release notes: ISA 7.x came with CUDA 11.x, 8.0-8.5 with 12.0-12.5,
  // 8.6 with 12.7, 8.7 with 12.8, 8.8 with 12.9, 9.x with 13.x.
  if (major == 9) return 13000 + minor * 10;
  if (major == 8 && minor <= 5) return 12000 + minor * 10;
  if (major == 8) return 12000 + (minor + 1) * 10;
  if (major == 7) return 11000 + minor * 10;
  return 0;
}

void check_driver_version(const CodeChoice& c, int32_t driver_version, std::string_view what) {
  if (c.min_driver_version <= 0 || driver_version <= 0 || driver_version >= c.min_driver_version) return;
  fail(
      "{}: the plan's kernels ({}) need a CUDA driver of version {} or newer, this driver is version {} "
      "(update the NVIDIA driver, or recompile the model with a kiln whose NVRTC is at most CUDA {})",
      what, c.describe(), driver_version_name(c.min_driver_version), driver_version_name(driver_version),
      driver_version_name(driver_version));
}

Plan read_plan_file(const std::string& path, const LoadOptions& opts) {
  reject_directory(path, "a plan file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open plan file", path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return deserialize(bytes.data(), bytes.size(), path, opts);
}

void write_plan_file(const std::string& path, const Plan& p) {
  // file_io's writer: the system's reason on failure, and no torn plan left.
  write_file_pieces(path, [&p](const FilePieceWriter& w) { write_plan(p, w); });
}

}  // namespace kiln::plan
