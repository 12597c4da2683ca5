#include "runtime/plan_format.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>

#include "ir/error.h"
#include "runtime/version.h"

namespace kiln::plan {

namespace {

enum SectionId : uint32_t {
  kMeta = 1,
  kGraph = 2,
  kWeights = 3,
  kKernels = 4,
  kLaunches = 5,
  kMemory = 6,
  kResources = 7,  // optional: a plan without it loads with the fields it holds unknown (-1)
};
constexpr uint32_t kSectionIds[] = {kMeta, kGraph, kWeights, kKernels, kLaunches, kMemory};  // required
constexpr size_t kFixedHeader = 40;  // magic 8, version 4, header size 4, file size 8, count 4, pad 4, xxh64 8
constexpr size_t kTableEntry = 32;   // id 4, pad 4, offset 8, size 8, xxh64 8
constexpr size_t kChecksumAt = 32;   // offset of the header checksum

uint64_t align_up(uint64_t v) { return (v + kAlignment - 1) / kAlignment * kAlignment; }

// Little-endian encoding (the hosts kiln supports are little-endian; the
// fields are copied byte for byte).
class Writer {
 public:
  std::vector<uint8_t> bytes;
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
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

void put_type(Writer& w, const TensorType& t) {
  w.put<uint8_t>(static_cast<uint8_t>(t.dtype));
  w.put<uint8_t>(static_cast<uint8_t>(t.layout));
  w.put<uint64_t>(t.shape.size());
  for (int64_t d : t.shape) w.put<int64_t>(d);
}

TensorType get_type(Reader& r) {
  TensorType t;
  uint8_t dt = r.get<uint8_t>("dtype");
  if (dt >= kNumDTypes) fail("{}: dtype code {} is not a kiln dtype (0..{})", r.what(), dt, kNumDTypes - 1);
  t.dtype = static_cast<DType>(dt);
  uint8_t layout = r.get<uint8_t>("layout");
  if (layout > static_cast<uint8_t>(Layout::NHWC)) fail("{}: layout code {} is unknown", r.what(), layout);
  t.layout = static_cast<Layout>(layout);
  uint64_t rank = r.count("rank", 8);
  for (uint64_t i = 0; i < rank; ++i) {
    int64_t d = r.get<int64_t>("dim");
    if (d < 0) fail("{}: negative dimension {}", r.what(), d);
    t.shape.push_back(d);
  }
  int64_t n = 0;
  try {
    n = t.numel();
  } catch (const Error& e) {
    fail("{}: {}", r.what(), e.what());
  }
  if (n > (int64_t(1) << 62) / int64_t(dtype_size(t.dtype)))
    fail("{}: a tensor of {} elements of {} is too large", r.what(), n, dtype_name(t.dtype));
  return t;
}

std::vector<uint8_t> write_meta(const Meta& m) {
  Writer w;
  w.str(m.kiln_version);
  w.str(m.target);
  w.str(m.precision);
  w.put<uint64_t>(m.archs.size());
  for (const auto& a : m.archs) w.str(a);
  w.put<uint8_t>(m.gpu_kernels);
  w.str(m.no_gpu_reason);
  w.put<uint64_t>(m.graph_constants);
  w.put<int32_t>(m.cubin_driver_version);
  w.put<int32_t>(m.ptx_driver_version);
  return w.bytes;
}

Meta read_meta(Reader r, uint32_t version) {
  Meta m;
  m.kiln_version = r.str("kiln version");
  m.target = r.str("target");
  m.precision = r.str("precision");
  uint64_t n = r.count("arch count", 8);
  for (uint64_t i = 0; i < n; ++i) m.archs.push_back(r.str("arch"));
  m.gpu_kernels = r.get<uint8_t>("gpu kernels flag") != 0;
  m.no_gpu_reason = r.str("no-gpu reason");
  m.graph_constants = r.get<uint64_t>("graph constant count");
  if (version >= 2) {
    m.cubin_driver_version = r.get<int32_t>("CUBIN driver version");
    m.ptx_driver_version = r.get<int32_t>("PTX driver version");
    for (int32_t v : {m.cubin_driver_version, m.ptx_driver_version})
      if (v < 0) fail("{}: driver version {} is negative", r.what(), v);
  }
  r.expect_end();
  return m;
}

std::vector<uint8_t> write_weights(const Plan& p) {
  Writer w;
  w.put<uint64_t>(p.weights.size());
  for (const WeightEntry& e : p.weights) {
    put_type(w, e.type);
    w.put<uint64_t>(e.offset);
    w.put<uint64_t>(e.nbytes);
  }
  w.pad_to(kAlignment);
  w.bytes.insert(w.bytes.end(), p.weight_data.begin(), p.weight_data.end());
  return w.bytes;
}

void read_weights(Reader r, Plan& p) {
  uint64_t n = r.count("weight count", 26);
  for (uint64_t i = 0; i < n; ++i) {
    WeightEntry e;
    e.type = get_type(r);
    e.offset = r.get<uint64_t>("weight offset");
    e.nbytes = r.get<uint64_t>("weight size");
    p.weights.push_back(std::move(e));
  }
  uint64_t data_at = align_up(r.pos());
  r.seek(data_at, "weight data");
  uint64_t data_size = r.size() - data_at;
  for (size_t i = 0; i < p.weights.size(); ++i) {
    const WeightEntry& e = p.weights[i];
    if (e.nbytes != e.type.nbytes())
      fail("{}: weight {} ({}) has {} bytes, expected {}", r.what(), i, e.type.str(), e.nbytes, e.type.nbytes());
    if (e.offset % kAlignment)
      fail("{}: weight {} offset {} is not {}-byte aligned", r.what(), i, e.offset, kAlignment);
    if (e.offset > data_size || e.nbytes > data_size - e.offset)
      fail("{}: weight {} ({} bytes at {}) is past the data's end ({} bytes)", r.what(), i, e.nbytes, e.offset,
           data_size);
  }
  p.weight_data.assign(r.data() + data_at, r.data() + r.size());
}

std::vector<uint8_t> write_kernels(const std::vector<Kernel>& ks) {
  Writer w;
  w.put<uint64_t>(ks.size());
  for (const Kernel& k : ks) {
    w.str(k.name);
    w.str(k.source);
    w.str(k.arch);
    w.blob(k.cubin);
    w.str(k.ptx);
    w.put<uint64_t>(k.more_cubins.size());
    for (const ArchCubin& c : k.more_cubins) {
      w.str(c.arch);
      w.blob(c.image);
      w.put<int32_t>(c.registers);
      w.put<int32_t>(c.static_shared_bytes);
      w.put<int32_t>(c.spill_bytes);
    }
  }
  return w.bytes;
}

std::vector<Kernel> read_kernels(Reader r, uint32_t version) {
  std::vector<Kernel> ks;
  uint64_t n = r.count("kernel count", 40);
  for (uint64_t i = 0; i < n; ++i) {
    Kernel k;
    k.name = r.str("kernel name");
    k.source = r.str("kernel source");
    k.arch = r.str("kernel arch");
    k.cubin = r.blob("kernel cubin");
    k.ptx = r.str("kernel ptx");
    if (version >= 2) {
      uint64_t m = r.count("more CUBINs count", 28);
      for (uint64_t j = 0; j < m; ++j) {
        ArchCubin c;
        c.arch = r.str("CUBIN arch");
        c.image = r.blob("CUBIN");
        for (int32_t* v : {&c.registers, &c.static_shared_bytes, &c.spill_bytes}) {
          *v = r.get<int32_t>("CUBIN resource");
          if (*v < -1) fail("{}: kernel {}: {} resource value {} is negative", r.what(), k.name, c.arch, *v);
        }
        if (c.arch == k.arch) fail("{}: kernel {} has two CUBINs for {}", r.what(), k.name, c.arch);
        for (const ArchCubin& o : k.more_cubins)
          if (o.arch == c.arch) fail("{}: kernel {} has two CUBINs for {}", r.what(), k.name, c.arch);
        k.more_cubins.push_back(std::move(c));
      }
    }
    ks.push_back(std::move(k));
  }
  r.expect_end();
  return ks;
}

std::vector<uint8_t> write_steps(const std::vector<Step>& steps) {
  Writer w;
  w.put<uint64_t>(steps.size());
  for (const Step& s : steps) {
    w.put<uint8_t>(static_cast<uint8_t>(s.kind));
    w.put<uint32_t>(s.node);
    w.put<uint32_t>(s.kernel);
    for (const Dim3* d : {&s.grid, &s.block}) {
      w.put<uint32_t>(d->x);
      w.put<uint32_t>(d->y);
      w.put<uint32_t>(d->z);
    }
    w.put<uint32_t>(s.shared_bytes);
    w.put<uint64_t>(s.args.size());
    for (const BufferRef& b : s.args) {
      w.put<uint8_t>(static_cast<uint8_t>(b.kind));
      w.put<uint32_t>(b.index);
      w.put<uint64_t>(b.offset);
      w.put<uint64_t>(b.nbytes);
      w.put<int64_t>(b.elements);
    }
  }
  return w.bytes;
}

std::vector<Step> read_steps(Reader r) {
  std::vector<Step> steps;
  uint64_t n = r.count("step count", 45);
  for (uint64_t i = 0; i < n; ++i) {
    Step s;
    uint8_t kind = r.get<uint8_t>("step kind");
    if (kind > static_cast<uint8_t>(StepKind::Copy)) fail("{}: step {} has unknown kind {}", r.what(), i, kind);
    s.kind = static_cast<StepKind>(kind);
    s.node = r.get<uint32_t>("step node");
    s.kernel = r.get<uint32_t>("step kernel");
    for (Dim3* d : {&s.grid, &s.block}) {
      d->x = r.get<uint32_t>("launch dims");
      d->y = r.get<uint32_t>("launch dims");
      d->z = r.get<uint32_t>("launch dims");
    }
    s.shared_bytes = r.get<uint32_t>("shared bytes");
    uint64_t nargs = r.count("argument count", 29);
    for (uint64_t a = 0; a < nargs; ++a) {
      BufferRef b;
      uint8_t bk = r.get<uint8_t>("buffer kind");
      if (bk > static_cast<uint8_t>(BufferKind::Weight))
        fail("{}: step {} argument {} has unknown buffer kind {}", r.what(), i, a, bk);
      b.kind = static_cast<BufferKind>(bk);
      b.index = r.get<uint32_t>("buffer index");
      b.offset = r.get<uint64_t>("buffer offset");
      b.nbytes = r.get<uint64_t>("buffer size");
      b.elements = r.get<int64_t>("buffer elements");
      s.args.push_back(b);
    }
    if (s.kind == StepKind::Copy && s.args.size() != 2)
      fail("{}: copy step {} has {} buffers, expected 2", r.what(), i, s.args.size());
    steps.push_back(std::move(s));
  }
  r.expect_end();
  return steps;
}

std::vector<uint8_t> write_memory(const Memory& m) {
  Writer w;
  w.put<uint64_t>(m.arena_bytes);
  w.put<uint64_t>(m.alignment);
  w.put<uint64_t>(m.values.size());
  for (const MemoryEntry& e : m.values) {
    w.put<uint32_t>(e.node);
    w.put<uint32_t>(e.result);
    w.put<uint8_t>(e.storage);
    w.put<int64_t>(e.offset);
    w.put<int64_t>(e.size);
  }
  return w.bytes;
}

Memory read_memory(Reader r) {
  Memory m;
  m.arena_bytes = r.get<uint64_t>("arena size");
  m.alignment = r.get<uint64_t>("alignment");
  uint64_t n = r.count("value count", 25);
  for (uint64_t i = 0; i < n; ++i) {
    MemoryEntry e;
    e.node = r.get<uint32_t>("node");
    e.result = r.get<uint32_t>("result");
    e.storage = r.get<uint8_t>("storage");
    e.offset = r.get<int64_t>("offset");
    e.size = r.get<int64_t>("size");
    m.values.push_back(e);
  }
  r.expect_end();
  return m;
}

// Section `resources`: the memory plan's live peak, then per kernel (as many
// as the kernels section has) registers, static shared bytes, spill bytes.
std::vector<uint8_t> write_resources(const Plan& p) {
  Writer w;
  w.put<int64_t>(p.memory.live_peak_bytes);
  w.put<uint64_t>(p.kernels.size());
  for (const Kernel& k : p.kernels) {
    w.put<int32_t>(k.registers);
    w.put<int32_t>(k.static_shared_bytes);
    w.put<int32_t>(k.spill_bytes);
  }
  return w.bytes;
}

void read_resources(Reader r, Plan& p) {
  int64_t peak = r.get<int64_t>("live peak");
  if (peak < -1) fail("{}: live peak {} is negative", r.what(), peak);
  p.memory.live_peak_bytes = peak;
  uint64_t n = r.count("kernel count", 12);
  if (n != p.kernels.size())
    fail("{}: resources for {} kernels, the kernels section has {}", r.what(), n, p.kernels.size());
  for (Kernel& k : p.kernels) {
    for (int32_t* v : {&k.registers, &k.static_shared_bytes, &k.spill_bytes}) {
      *v = r.get<int32_t>("kernel resource");
      if (*v < -1) fail("{}: kernel {}: resource value {} is negative", r.what(), k.name, *v);
    }
  }
  r.expect_end();
}

// Cross-section checks: every binding inside the buffer it names.
void check_steps(const Plan& p, std::string_view what) {
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    if (s.kind == StepKind::Kernel && s.kernel >= p.kernels.size())
      fail("{}: launch step {} names kernel {}, the plan has {}", what, i, s.kernel, p.kernels.size());
    for (const BufferRef& b : s.args) {
      if (b.kind == BufferKind::Weight) {
        if (b.index >= p.weights.size())
          fail("{}: launch step {} binds weight {}, the plan has {}", what, i, b.index, p.weights.size());
        const WeightEntry& w = p.weights[b.index];
        if (b.offset > w.nbytes || b.nbytes > w.nbytes - b.offset)
          fail("{}: launch step {} reads {} bytes at {} of weight {} ({} bytes)", what, i, b.nbytes, b.offset, b.index,
               w.nbytes);
      } else if (b.kind == BufferKind::Arena) {
        if (b.offset > p.memory.arena_bytes || b.nbytes > p.memory.arena_bytes - b.offset)
          fail("{}: launch step {} binds {} bytes at arena offset {}, the arena has {}", what, i, b.nbytes, b.offset,
               p.memory.arena_bytes);
      }
    }
  }
}

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
  }
  return fmt::format("#{}", id);
}

std::vector<uint8_t> serialize(const Plan& p) {
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> sections;
  sections.emplace_back(kMeta, write_meta(p.meta));
  sections.emplace_back(kGraph, std::vector<uint8_t>(p.graph_text.begin(), p.graph_text.end()));
  sections.emplace_back(kWeights, write_weights(p));
  sections.emplace_back(kKernels, write_kernels(p.kernels));
  sections.emplace_back(kLaunches, write_steps(p.steps));
  sections.emplace_back(kMemory, write_memory(p.memory));
  sections.emplace_back(kResources, write_resources(p));

  uint64_t header_size = kFixedHeader + kTableEntry * sections.size();
  std::vector<uint64_t> offsets;
  uint64_t at = align_up(header_size);
  for (auto& [id, bytes] : sections) {
    offsets.push_back(at);
    at = align_up(at + bytes.size());
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
    h.put<uint32_t>(sections[i].first);
    h.put<uint32_t>(0);
    h.put<uint64_t>(offsets[i]);
    h.put<uint64_t>(sections[i].second.size());
    h.put<uint64_t>(XXH64(sections[i].second.data(), sections[i].second.size(), 0));
  }
  uint64_t sum = XXH64(h.bytes.data(), h.bytes.size(), 0);
  std::memcpy(h.bytes.data() + kChecksumAt, &sum, 8);

  std::vector<uint8_t> out(file_size, 0);
  std::memcpy(out.data(), h.bytes.data(), h.bytes.size());
  for (size_t i = 0; i < sections.size(); ++i)
    if (!sections[i].second.empty())
      std::memcpy(out.data() + offsets[i], sections[i].second.data(), sections[i].second.size());
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
  check_steps(p, what);
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
  std::vector<std::string> candidates;
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
    // PTX for sm_X JITs on any GPU of arch >= X.
    all_ptx &= !k.ptx.empty() && ka >= 0 && ka <= dev;
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
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open plan file", path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return deserialize(bytes.data(), bytes.size(), path, opts);
}

void write_plan_file(const std::string& path, const Plan& p) {
  std::vector<uint8_t> bytes = serialize(p);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("{}: cannot write plan file", path);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("{}: write failed", path);
}

}  // namespace kiln::plan
