// Module images and per-launch limits.
// - A CUBIN runs only on its own major arch with an equal or newer minor
//   (CUDA C Programming Guide, "Binary Compatibility"): otherwise
//   CUDA_ERROR_NO_BINARY_FOR_GPU. Its arch is in the ELF header's e_flags.
// - PTX is JIT-compiled by the driver, which accepts PTX ISA versions up to
//   its own (PTX ISA release notes: CUDA 12.0 = ISA 8.0 ... 13.0 = 9.0):
//   newer is CUDA_ERROR_UNSUPPORTED_PTX_VERSION; a `.target` newer than the
//   device cannot be compiled for it (CUDA_ERROR_INVALID_PTX), nor an
//   arch-specific `.target sm_XXa` for any device but sm_XX (PTX ISA, "Target
//   ISA notes": the `a` features are not forward compatible). An sm_90a
//   CUBIN is refused off Hopper by the major-arch rule above (its ELF e_flags
//   name sm_90; the arch-specific mark sits in .nv.compat, not read here).
// - A launch is checked the way cuLaunchKernel checks it, against the
//   device's limits (Programming Guide, "Compute Capabilities", table
//   "Technical Specifications"): block dims <= 1024 x 1024 x 64 and <= 1024
//   threads, grid dims <= 2^31-1 x 65535 x 65535, dynamic shared memory <=
//   the function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (48 KiB
//   minus its static shared memory unless raised with cuFuncSetAttribute, at
//   most the device's opt-in maximum), all CUDA_ERROR_INVALID_VALUE;
//   registers per thread (from the CUBIN's .nv.info, allocated per warp in
//   units of 256) times the block's warps <= 65536: else
//   CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES. PTX kernels have no register count
//   before the JIT runs; the fake checks everything else for them.
// - Kernel parameters (Programming Guide, "Function Parameters"; NVIDIA's
//   "CUDA 12.1 Supports Large Kernel Parameters"): at most 32,764 bytes on
//   Volta and newer with a CUDA 12.1+ driver, 4,096 bytes otherwise. The
//   layout comes from the image, as the driver takes it ("the number of
//   kernel parameters and their offsets and sizes ... retrieved directly from
//   the kernel's image", cuLaunchKernel): a CUBIN's .nv.info.<kernel>
//   (EIATTR_KPARAM_INFO per parameter, EIATTR_CBANK_PARAM_SIZE in all), a
//   PTX .entry's .param list. PTX over the space fails to JIT at load
//   (ptxas: "Formal parameter space overflowed"; CUDA_ERROR_INVALID_PTX); a
//   CUBIN over it is refused at launch: CUDA_ERROR_NOT_SUPPORTED where only
//   the 4 KiB space is (an older driver or GPU), CUDA_ERROR_INVALID_VALUE past
//   32,764 bytes (no toolchain writes such a CUBIN).
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "fake.h"

namespace fake {

namespace {

template <typename T>
bool read(const uint8_t* b, size_t size, uint64_t at, T* v) {
  if (at > size || sizeof(T) > size - at) return false;
  std::memcpy(v, b + at, sizeof(T));
  return true;
}

// A kernel's parameters from its .nv.info.<kernel> section: entries of
// (format u8, attribute u8, u16) where format 4 (SVAL) has a u16 payload size
// and that payload, the others keep their value in the u16.
//   EIATTR_KPARAM_INFO (0x17, SVAL): u32 index, u16 ordinal, u16 offset,
//                      u32 flags whose bits 18-31 are the size
//   EIATTR_CBANK_PARAM_SIZE (0x19, HVAL): the parameters' bytes in all
template <typename Sec>
void read_params(const uint8_t* b, size_t size, const Sec& s, Function& f) {
  std::map<int, Function::Param> by_ordinal;
  int total = -1;
  for (uint64_t at = s.off, end = s.off + s.size; at + 4 <= end;) {
    uint8_t format = b[at], attr = b[at + 1];
    uint16_t v = 0;
    read(b, size, at + 2, &v);
    if (format != 4) {
      if (format == 3 && attr == 0x19) total = v;
      at += 4;
      continue;
    }
    if (attr == 0x17 && v >= 12 && at + 16 <= end) {
      uint16_t ordinal = 0, offset = 0;
      uint32_t flags = 0;
      read(b, size, at + 8, &ordinal);
      read(b, size, at + 10, &offset);
      read(b, size, at + 12, &flags);
      by_ordinal[ordinal] = {int(offset), int(flags >> 18)};
    }
    at += 4 + v;
  }
  if (total < 0) return;
  f.params_known = true;
  f.param_bytes = total;
  for (auto& [ordinal, p] : by_ordinal) f.params.push_back(p);
}

// The kernels of a CUBIN with their registers and static shared memory;
// false when the ELF file is malformed. Same layout as runtime/cubin_info.cpp
// reads (the fake stays free of kiln's libraries).
bool read_cubin(const uint8_t* b, size_t size, int* sm, Module& m) {
  if (size < 64 || b[4] != 2 || b[5] != 1) return false;
  uint32_t flags = 0;
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0, shstrndx = 0;
  if (!read(b, size, 0x30, &flags) || !read(b, size, 0x28, &shoff) || !read(b, size, 0x3A, &shentsize) ||
      !read(b, size, 0x3C, &shnum) || !read(b, size, 0x3E, &shstrndx) || shentsize < 64 || shstrndx >= shnum)
    return false;
  // ELF ABI version 8 and later (CUDA 12.8+) keep the SM in bits 8-15; older in bits 0-7.
  *sm = b[8] >= 8 ? int((flags >> 8) & 0xff) : int(flags & 0xff);
  struct Sec {
    uint32_t name, type, link;
    uint64_t off, size, entsize;
  };
  std::vector<Sec> sh(shnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    uint64_t at = shoff + uint64_t(i) * shentsize;
    Sec& s = sh[i];
    if (!read(b, size, at, &s.name) || !read(b, size, at + 4, &s.type) || !read(b, size, at + 24, &s.off) ||
        !read(b, size, at + 32, &s.size) || !read(b, size, at + 40, &s.link) || !read(b, size, at + 56, &s.entsize))
      return false;
    if (s.type != 8 && (s.off > size || s.size > size - s.off)) return false;
  }
  auto str = [&](const Sec& t, uint64_t at) -> std::string {
    if (at >= t.size) return "";
    const char* p = reinterpret_cast<const char*>(b + t.off + at);
    return std::string(p, strnlen(p, t.size - at));
  };
  std::vector<std::string> symbols;  // by index: function symbols' names ("" for others)
  const Sec* info = nullptr;
  std::map<std::string, uint64_t> shared;
  std::map<std::string, const Sec*> own_info;  // .nv.info.<kernel>
  for (const Sec& s : sh) {
    std::string n = str(sh[shstrndx], s.name);
    if (n == ".nv.info") info = &s;
    if (n.rfind(".nv.shared.", 0) == 0) shared[n.substr(11)] = s.size;
    if (n.rfind(".nv.info.", 0) == 0) own_info[n.substr(9)] = &s;
    if (s.type != 2 || !symbols.empty() || s.entsize < 24 || s.link >= shnum) continue;  // SHT_SYMTAB
    for (uint64_t i = 0; i < s.size / s.entsize; ++i) {
      uint32_t name = 0;
      uint8_t info_byte = 0;
      read(b, size, s.off + i * s.entsize, &name);
      read(b, size, s.off + i * s.entsize + 4, &info_byte);
      symbols.push_back((info_byte & 0xf) == 2 ? str(sh[s.link], name) : "");  // STT_FUNC
    }
  }
  for (const std::string& n : symbols)
    if (!n.empty()) {
      auto f = std::make_unique<Function>();
      f->name = n;
      // sm_80+ adds a 1 KiB system reserve to each kernel's shared section.
      uint64_t sz = shared.count(n) ? shared[n] : 0;
      f->static_shared = int(*sm >= 80 && sz >= 1024 ? sz - 1024 : sz);
      m.functions[n] = std::move(f);
    }
  for (auto& [name, f] : m.functions)
    if (own_info.count(name)) read_params(b, size, *own_info[name], *f);
  if (info)
    for (uint64_t at = info->off, end = info->off + info->size; at + 4 <= end;) {
      uint8_t format = b[at], attr = b[at + 1];
      uint16_t sz = 0;
      read(b, size, at + 2, &sz);
      if (format == 4 && sz >= 8 && at + 12 <= end) {
        uint32_t sym = 0, value = 0;
        read(b, size, at + 4, &sym);
        read(b, size, at + 8, &value);
        if (attr == 0x2f && sym < symbols.size() && m.functions.count(symbols[sym]))  // EIATTR_REGCOUNT
          m.functions[symbols[sym]]->registers = int(value);
      }
      at += 4 + (format == 4 ? sz : 0);  // other formats keep their value in the size field
    }
  return true;
}

// The newest PTX ISA (x10) a driver of this version JIT-compiles.
int max_ptx_isa(int driver) {
  if (driver >= 13000) return 90;
  if (driver >= 12090) return 88;
  if (driver >= 12080) return 87;
  if (driver >= 12050) return 85;
  if (driver >= 12000) return 80 + (driver % 1000) / 10;
  if (driver >= 11000) return 70 + (driver % 1000) / 10;
  return 63;
}

// An .entry's parameter list from `at` (just after its name): `(`, then
// `.param [.align A] .TYPE [.ptr ...] NAME[N]` separated by commas, `)`; each
// parameter at its alignment (its .align, else its type's size). False when
// the list is malformed.
bool read_ptx_params(const std::string& s, size_t at, Function& f) {
  size_t open = s.find_first_not_of(" \t\r\n", at);
  if (open == std::string::npos || s[open] != '(') return true;  // no parameters
  size_t close = s.find(')', open);
  if (close == std::string::npos) return false;
  std::string list = s.substr(open + 1, close - open - 1);
  int offset = 0;
  for (size_t p = list.find(".param"); p != std::string::npos; p = list.find(".param", p + 6)) {
    size_t end = list.find(',', p);
    std::string one = list.substr(p, end == std::string::npos ? std::string::npos : end - p);
    int size = 0, align = 0;
    static const std::pair<const char*, int> kTypes[] = {
        {".b8 ", 1},  {".u8 ", 1},  {".s8 ", 1},  {".b16 ", 2}, {".u16 ", 2}, {".s16 ", 2}, {".f16 ", 2}, {".b32 ", 4},
        {".u32 ", 4}, {".s32 ", 4}, {".f32 ", 4}, {".b64 ", 8}, {".u64 ", 8}, {".s64 ", 8}, {".f64 ", 8}};
    for (const auto& [t, n] : kTypes)
      if (one.find(t) != std::string::npos) size = n;
    if (size == 0) return false;
    size_t a = one.find(".align ");
    if (a != std::string::npos) align = std::atoi(one.c_str() + a + 7);
    // `.ptr .align N` describes the pointee, not the parameter.
    if (one.find(".ptr") != std::string::npos && one.find(".ptr") < a) align = 0;
    size_t bracket = one.find('[');
    int count = bracket == std::string::npos ? 1 : std::atoi(one.c_str() + bracket + 1);
    if (align <= 0) align = size;
    offset = (offset + align - 1) / align * align;
    f.params.push_back({offset, size * count});
    offset += size * count;
  }
  f.param_bytes = offset;
  f.params_known = true;
  return true;
}

CUresult read_ptx(const char* text, Module& m) {
  std::string s(text);
  int major = 0, minor = 0, sm = 0;
  size_t v = s.find(".version ");
  if (v == std::string::npos || std::sscanf(s.c_str() + v, ".version %d.%d", &major, &minor) != 2) return kInvalidPtx;
  size_t t = s.find(".target sm_");
  if (t == std::string::npos || std::sscanf(s.c_str() + t, ".target sm_%d", &sm) != 1) return kInvalidPtx;
  if (st().rules.modules) {
    if (major * 10 + minor > max_ptx_isa(st().driver_version)) return kUnsupportedPtxVersion;
    if (sm > st().dev.major * 10 + st().dev.minor) return kInvalidPtx;
    // An arch-specific target (".target sm_90a", wgmma) compiles for that arch alone.
    size_t d = t + 11;
    while (d < s.size() && s[d] >= '0' && s[d] <= '9') ++d;
    if (d < s.size() && s[d] == 'a' && sm != st().dev.major * 10 + st().dev.minor) return kInvalidPtx;
  }
  for (size_t at = s.find(".entry "); at != std::string::npos; at = s.find(".entry ", at + 1)) {
    size_t b = at + 7, e = s.find_first_of("( \n", b);
    auto f = std::make_unique<Function>();
    f->name = s.substr(b, e - b);
    if (!read_ptx_params(s, e, *f)) return kInvalidPtx;
    // The JIT (ptxas) refuses an entry whose parameters overflow the space.
    if (st().rules.params && f->param_bytes > param_space()) return kInvalidPtx;
    m.functions[f->name] = std::move(f);
  }
  return 0;
}

}  // namespace

int param_space() { return st().driver_version >= 12010 && st().dev.major >= 7 ? 32764 : 4096; }

CUresult check_params(const Function& f) {
  if (!st().rules.params || f.param_bytes <= param_space()) return 0;
  return f.param_bytes <= 32764 ? kNotSupported : kInvalidValue;
}

CUresult check_launch(const Function& f, const unsigned* grid, const unsigned* block, unsigned shared) {
  const Device& d = st().dev;
  uint64_t threads = uint64_t(block[0]) * block[1] * block[2];
  for (int i = 0; i < 3; ++i) {
    if (block[i] == 0 || block[i] > unsigned(d.max_block[i])) return kInvalidValue;
    if (grid[i] == 0 || grid[i] > unsigned(d.max_grid[i])) return kInvalidValue;
  }
  if (threads > uint64_t(d.max_threads)) return kInvalidValue;
  if (int64_t(shared) > f.max_dynamic_shared) return kInvalidValue;
  if (f.registers > 0) {
    uint64_t per_warp = (uint64_t(f.registers) * 32 + 255) / 256 * 256;
    if ((threads + 31) / 32 * per_warp > uint64_t(d.regs_per_block)) return kLaunchOutOfResources;
  }
  return 0;
}

}  // namespace fake

using namespace fake;
#define FAKE_LOCK Lock lock(st().mu)

extern "C" {

CUresult cuModuleLoadData(void** out, const void* image) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (!image) return kInvalidValue;
  auto m = std::make_unique<Module>();
  const auto* b = static_cast<const uint8_t*>(image);
  m->ptx = std::memcmp(image,
                       "\x7f"
                       "ELF",
                       4) != 0;
  if (m->ptx) {
    if (CUresult e = read_ptx(static_cast<const char*>(image), *m)) return e;
    ++st().ptx_loads;
  } else {
    // The image's size is not passed: it ends where its section headers or
    // the last section's data end, whichever is later.
    uint64_t shoff = 0;
    uint16_t shentsize = 0, shnum = 0;
    std::memcpy(&shoff, b + 0x28, 8);
    std::memcpy(&shentsize, b + 0x3A, 2);
    std::memcpy(&shnum, b + 0x3C, 2);
    size_t size = size_t(shoff + uint64_t(shentsize) * shnum);
    for (uint16_t i = 0; i < shnum && shentsize >= 64; ++i) {
      uint32_t type = 0;
      uint64_t off = 0, sz = 0, at = shoff + uint64_t(i) * shentsize;
      std::memcpy(&type, b + at + 4, 4);
      std::memcpy(&off, b + at + 24, 8);
      std::memcpy(&sz, b + at + 32, 8);
      if (type != 8) size = std::max<size_t>(size, size_t(off + sz));
    }
    int sm = 0;
    if (!read_cubin(b, size, &sm, *m)) return kInvalidImage;
    const Device& d = st().dev;
    if (st().rules.modules && (sm / 10 != d.major || sm % 10 > d.minor)) return kNoBinaryForGpu;
    ++st().cubin_loads;
  }
  for (auto& [n, f] : m->functions) f->max_dynamic_shared = st().dev.shared_per_block - f->static_shared;
  *out = m.release();
  return 0;
}
CUresult cuModuleUnload(void* m) {
  FAKE_LOCK;
  if (!m) return kInvalidHandle;
  drain_all(lock);  // queued launches may name its functions
  delete static_cast<Module*>(m);
  return st().sticky;
}
CUresult cuModuleGetFunction(void** f, void* m, const char* name) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (!m) return kInvalidHandle;
  if (st().arg_count && st().arg_count(name) < 0) return kNotFound;
  auto& fns = static_cast<Module*>(m)->functions;
  auto it = fns.find(name);
  if (it == fns.end()) return kNotFound;
  *f = it->second.get();
  return 0;
}
// The offset and size of parameter `index` in the image's layout (CUDA
// 12.4+): CUDA_ERROR_INVALID_VALUE past the last one.
CUresult cuFuncGetParamInfo(void* f, size_t index, size_t* offset, size_t* size) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (!f) return kInvalidHandle;
  auto* fn = static_cast<Function*>(f);
  if (!offset || !fn->params_known || index >= fn->params.size()) return kInvalidValue;
  *offset = size_t(fn->params[index].offset);
  if (size) *size = size_t(fn->params[index].size);
  return 0;
}
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (8): at most the device's
// opt-in maximum minus the function's static shared memory.
CUresult cuFuncSetAttribute(void* f, int attr, int value) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (!f) return kInvalidHandle;
  auto* fn = static_cast<Function*>(f);
  if (attr == 8) {
    if (value < 0 || (st().rules.launch_limits && value > st().dev.shared_optin - fn->static_shared))
      return kInvalidValue;
    fn->max_dynamic_shared = value;
  }
  return 0;
}

}  // extern "C"
