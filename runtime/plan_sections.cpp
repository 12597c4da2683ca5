// One writer and one reader per plan section (docs/plan_format.md), and the
// checks across sections. Every read is bounds-checked and every failure
// names the section.
#include "runtime/plan_sections.h"

namespace kiln::plan::detail {

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
  // Plans never hold strings (compiler/plan_writer refuses them): a plan
  // naming the type is damaged or hand-made, and its bytes are no strings.
  if (t.dtype == DType::String) fail("{}: string tensors cannot be in a plan", r.what());
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

std::vector<uint8_t> write_weights_table(const Plan& p) {
  Writer w;
  w.put<uint64_t>(p.weights.size());
  for (const WeightEntry& e : p.weights) {
    put_type(w, e.type);
    w.put<uint64_t>(e.offset);
    w.put<uint64_t>(e.nbytes);
  }
  w.pad_to(kAlignment);
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
    w.put<uint8_t>(static_cast<uint8_t>(static_cast<uint8_t>(s.kind) | (s.param_table ? kStepParamTableBit : 0)));
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
    s.param_table = (kind & kStepParamTableBit) != 0;
    kind &= static_cast<uint8_t>(~kStepParamTableBit);
    if (kind > static_cast<uint8_t>(StepKind::Control)) fail("{}: step {} has unknown kind {}", r.what(), i, kind);
    if (s.param_table && kind != static_cast<uint8_t>(StepKind::Kernel))
      fail("{}: {} step {} is marked as taking a pointer table", r.what(),
           kind == static_cast<uint8_t>(StepKind::Copy) ? "copy" : "control", i);
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
      if (bk > static_cast<uint8_t>(BufferKind::None))
        fail("{}: step {} argument {} has unknown buffer kind {}", r.what(), i, a, bk);
      b.kind = static_cast<BufferKind>(bk);
      b.index = r.get<uint32_t>("buffer index");
      b.offset = r.get<uint64_t>("buffer offset");
      b.nbytes = r.get<uint64_t>("buffer size");
      b.elements = r.get<int64_t>("buffer elements");
      if (b.kind == BufferKind::None && (b.index || b.offset || b.nbytes || b.elements))
        fail(
            "{}: step {} argument {} is an absent operand (kind none) with index {}, offset {}, {} bytes, {} "
            "elements (all must be 0)",
            r.what(), i, a, b.index, b.offset, b.nbytes, b.elements);
      if (b.kind == BufferKind::None && kind == static_cast<uint8_t>(StepKind::Copy))
        fail("{}: copy step {} has an absent operand (kind none) as argument {}", r.what(), i, a);
      s.args.push_back(b);
    }
    if (s.param_table && s.args.empty()) fail("{}: step {} takes a pointer table of no buffers", r.what(), i);
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
  // Only when there is one: plans without a zeroed region keep their bytes
  // (and an older reader refuses a plan that has one: trailing bytes).
  if (m.zeroed_bytes > 0) {
    w.put<uint64_t>(m.zeroed_offset);
    w.put<uint64_t>(m.zeroed_bytes);
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
  if (r.remaining() > 0) {
    m.zeroed_offset = r.get<uint64_t>("zeroed region offset");
    m.zeroed_bytes = r.get<uint64_t>("zeroed region size");
    if (m.zeroed_bytes == 0 || m.zeroed_offset % 4 || m.zeroed_offset > m.arena_bytes ||
        m.zeroed_bytes > m.arena_bytes - m.zeroed_offset)
      fail("{}: zeroed region of {} bytes at {} is not an aligned range of the arena of {} bytes", r.what(),
           m.zeroed_bytes, m.zeroed_offset, m.arena_bytes);
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

void check_binding(const Plan& p, const BufferRef& b, std::string_view what, std::string_view where) {
  if (b.kind == BufferKind::Weight) {
    if (b.index >= p.weights.size())
      fail("{}: {} binds weight {}, the plan has {}", what, where, b.index, p.weights.size());
    const WeightEntry& w = p.weights[b.index];
    if (b.offset > w.nbytes || b.nbytes > w.nbytes - b.offset)
      fail("{}: {} reads {} bytes at {} of weight {} ({} bytes)", what, where, b.nbytes, b.offset, b.index, w.nbytes);
  } else if (b.kind == BufferKind::Arena) {
    if (b.offset > p.memory.arena_bytes || b.nbytes > p.memory.arena_bytes - b.offset)
      fail("{}: {} binds {} bytes at arena offset {}, the arena has {}", what, where, b.nbytes, b.offset,
           p.memory.arena_bytes);
  }
}

// Cross-section checks: every binding inside the buffer it names.
void check_steps(const Plan& p, std::string_view what) {
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    if (s.kind == StepKind::Kernel && s.kernel >= p.kernels.size())
      fail("{}: launch step {} names kernel {}, the plan has {}", what, i, s.kernel, p.kernels.size());
    if (s.kind == StepKind::Control && s.kernel >= p.control.size())
      fail("{}: launch step {} names control-flow record {}, the plan has {}", what, i, s.kernel, p.control.size());
    for (const BufferRef& b : s.args) check_binding(p, b, what, fmt::format("launch step {}", i));
  }
}

}  // namespace kiln::plan::detail
