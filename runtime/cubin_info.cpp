#include "runtime/cubin_info.h"

#include <cstring>

#include "ir/error.h"

namespace kiln::plan {

namespace {

template <typename T>
T read_at(const std::vector<uint8_t>& b, uint64_t at, const char* field) {
  if (at > b.size() || sizeof(T) > b.size() - at)
    fail("CUBIN: {} at offset {} is past the end ({} bytes)", field, at, b.size());
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

struct SectionHeader {
  uint32_t name = 0, type = 0, link = 0;
  uint64_t offset = 0, size = 0, entsize = 0;
};

constexpr uint32_t kShtSymtab = 2;
constexpr uint8_t kEifmtSval = 4;
constexpr uint8_t kEifmtHval = 3;
constexpr uint8_t kEiattrRegcount = 0x2f, kEiattrFrameSize = 0x11, kEiattrMaxThreads = 0x05,
                  kEiattrCbankParamSize = 0x19;

}  // namespace

CubinKernelInfo cubin_kernel_info(const std::vector<uint8_t>& b, const std::string& kernel) {
  static const uint8_t kElf[4] = {0x7f, 'E', 'L', 'F'};
  if (b.size() < 64 || std::memcmp(b.data(), kElf, 4) != 0) fail("CUBIN: not an ELF file ({} bytes)", b.size());
  if (b[4] != 2 || b[5] != 1) fail("CUBIN: not a 64-bit little-endian ELF file (class {}, data {})", b[4], b[5]);
  const uint64_t shoff = read_at<uint64_t>(b, 0x28, "e_shoff");
  const uint16_t shentsize = read_at<uint16_t>(b, 0x3A, "e_shentsize");
  const uint16_t shnum = read_at<uint16_t>(b, 0x3C, "e_shnum");
  const uint16_t shstrndx = read_at<uint16_t>(b, 0x3E, "e_shstrndx");
  if (shentsize < 64) fail("CUBIN: section header size {} (expected at least 64)", shentsize);
  if (shstrndx >= shnum) fail("CUBIN: section name table index {} of {} sections", shstrndx, shnum);
  std::vector<SectionHeader> sh(shnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    uint64_t at = shoff + uint64_t(i) * shentsize;
    sh[i].name = read_at<uint32_t>(b, at, "sh_name");
    sh[i].type = read_at<uint32_t>(b, at + 4, "sh_type");
    sh[i].offset = read_at<uint64_t>(b, at + 24, "sh_offset");
    sh[i].size = read_at<uint64_t>(b, at + 32, "sh_size");
    sh[i].link = read_at<uint32_t>(b, at + 40, "sh_link");
    sh[i].entsize = read_at<uint64_t>(b, at + 56, "sh_entsize");
    if (sh[i].type != 8 /* SHT_NOBITS */ && (sh[i].offset > b.size() || sh[i].size > b.size() - sh[i].offset))
      fail("CUBIN: section {} ({} bytes at {}) lies outside the file", i, sh[i].size, sh[i].offset);
  }
  // A NUL-terminated string at `at` of string table section `s`.
  auto string_at = [&](const SectionHeader& s, uint64_t at) -> std::string {
    if (at >= s.size) fail("CUBIN: string offset {} past its table ({} bytes)", at, s.size);
    const char* p = reinterpret_cast<const char*>(b.data() + s.offset + at);
    return std::string(p, strnlen(p, s.size - at));
  };

  // The kernel's symbol index.
  int64_t sym = -1;
  const SectionHeader* info = nullptr;
  const SectionHeader* own_info = nullptr;  // .nv.info.<kernel>
  for (const SectionHeader& s : sh) {
    std::string n = string_at(sh[shstrndx], s.name);
    if (n == ".nv.info") info = &s;
    if (n == ".nv.info." + kernel) own_info = &s;
    if (s.type != kShtSymtab || sym >= 0) continue;
    if (s.entsize < 24 || s.link >= shnum) fail("CUBIN: symbol table entry size {} / link {}", s.entsize, s.link);
    for (uint64_t i = 0; i < s.size / s.entsize; ++i)
      if (string_at(sh[s.link], read_at<uint32_t>(b, s.offset + i * s.entsize, "st_name")) == kernel) {
        sym = int64_t(i);
        break;
      }
  }
  if (sym < 0) fail("CUBIN: no symbol named {} (the kernel is not in this CUBIN)", kernel);
  CubinKernelInfo r;
  if (own_info)
    for (uint64_t at = own_info->offset, end = own_info->offset + own_info->size; at + 4 <= end;) {
      uint8_t format = b[at], attr = b[at + 1];
      uint16_t value = read_at<uint16_t>(b, at + 2, ".nv.info entry value");
      if (format != kEifmtSval) {
        if (format == kEifmtHval && attr == kEiattrCbankParamSize) r.param_bytes = value;
        at += 4;
        continue;
      }
      if (value > end - at - 4) fail("CUBIN: .nv.info.{} entry of {} bytes past the section's end", kernel, value);
      if (attr == kEiattrMaxThreads && value >= 12)
        r.max_threads = 1ll * read_at<uint32_t>(b, at + 4, "max threads x") * read_at<uint32_t>(b, at + 8, "y") *
                        read_at<uint32_t>(b, at + 12, "z");
      at += 4 + value;
    }
  if (!info) return r;
  for (uint64_t at = info->offset, end = info->offset + info->size; at + 4 <= end;) {
    uint8_t format = b[at], attr = b[at + 1];
    if (format != kEifmtSval) fail("CUBIN: .nv.info entry format {} at offset {} (expected 4)", format, at);
    uint16_t size = read_at<uint16_t>(b, at + 2, ".nv.info entry size");
    if (size > end - at - 4) fail("CUBIN: .nv.info entry of {} bytes past the section's end", size);
    if (size >= 8 && read_at<uint32_t>(b, at + 4, ".nv.info symbol") == uint64_t(sym)) {
      int value = static_cast<int>(read_at<uint32_t>(b, at + 8, ".nv.info value"));
      if (attr == kEiattrRegcount) r.registers = value;
      if (attr == kEiattrFrameSize) r.frame_bytes = value;
    }
    at += 4 + size;
  }
  return r;
}

}  // namespace kiln::plan
