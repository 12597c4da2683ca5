#include "codegen/nvrtc/kernel_cache.h"

#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <stdlib.h>
#include <unistd.h>

#include "ir/error.h"

namespace kiln::codegen {
namespace fs = std::filesystem;
namespace {

// Entry layout: magic, then length-prefixed fields (u64 little-endian as
// written by this machine; a cache is not meant to move between machines),
// then the xxh64 of everything before it.
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'K', 'C', '0', '1'};

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_bytes(std::string& out, const void* data, size_t n) {
  put_u64(out, n);
  out.append(static_cast<const char*>(data), n);
}
void put_str(std::string& out, const std::string& s) { put_bytes(out, s.data(), s.size()); }

struct Reader {  // bounds-checked reads; any failure sets ok = false
  const std::string& s;
  size_t pos = 0;
  bool ok = true;
  uint64_t u64() {
    uint64_t v = 0;
    if (!ok || s.size() - pos < 8) return ok = false, 0;
    std::memcpy(&v, s.data() + pos, 8);
    pos += 8;
    return v;
  }
  std::string str() {
    uint64_t n = u64();
    if (!ok || s.size() - pos < n) return ok = false, std::string();
    std::string r = s.substr(pos, n);
    pos += n;
    return r;
  }
  int i32() { return static_cast<int>(static_cast<int64_t>(u64())); }
};

fs::path default_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "kiln";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "kiln";
  return fs::temp_directory_path() / "kiln-cache";
}

}  // namespace

KernelCache::KernelCache(fs::path dir) : dir_((dir.empty() ? default_dir() : dir) / "kernels") {}

std::string KernelCache::make_key(const std::string& source, const std::vector<std::string>& options,
                                  const std::string& arch, const std::string& nvrtc_version) {
  // Length-prefixed, so no two different inputs give the same key.
  std::string key = "kiln-kernel-v1";
  put_str(key, nvrtc_version);
  put_str(key, arch);
  put_u64(key, options.size());
  for (const auto& o : options) put_str(key, o);
  put_str(key, source);
  return key;
}

fs::path KernelCache::path_for(const std::string& key) const {
  return dir_ / fmt::format("{:016x}.kernel", XXH64(key.data(), key.size(), 0));
}

std::optional<CompiledKernel> KernelCache::lookup(const std::string& key) const {
  std::ifstream in(path_for(key), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  if (data.size() < sizeof kMagic + 8 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  uint64_t sum = 0;
  std::memcpy(&sum, data.data() + data.size() - 8, 8);
  if (XXH64(data.data(), data.size() - 8, 0) != sum) return std::nullopt;
  const std::string body = data.substr(sizeof kMagic, data.size() - 8 - sizeof kMagic);
  Reader r{body};
  if (r.str() != key || !r.ok) return std::nullopt;  // a hash collision or another key
  CompiledKernel k;
  k.arch = r.str();
  std::string cubin = r.str();
  k.cubin.assign(cubin.begin(), cubin.end());
  k.ptx = r.str();
  k.log = r.str();
  k.registers = r.i32();
  k.shared_bytes = r.i32();
  k.spill_bytes = r.i32();
  if (!r.ok || r.pos != body.size()) return std::nullopt;
  return k;
}

std::string KernelCache::unwritable_reason() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return ec.message();
  // Permissions alone do not say it (root, read-only mounts): make a file.
  std::string probe = (dir_ / ".kiln-write-test-XXXXXX").string();
  int fd = ::mkstemp(probe.data());
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

bool KernelCache::store(const std::string& key, const CompiledKernel& k) const {
  std::string data(kMagic, sizeof kMagic);
  put_str(data, key);
  put_str(data, k.arch);
  put_bytes(data, k.cubin.data(), k.cubin.size());
  put_str(data, k.ptx);
  put_str(data, k.log);
  put_u64(data, static_cast<uint64_t>(static_cast<int64_t>(k.registers)));
  put_u64(data, static_cast<uint64_t>(static_cast<int64_t>(k.shared_bytes)));
  put_u64(data, static_cast<uint64_t>(static_cast<int64_t>(k.spill_bytes)));
  put_u64(data, XXH64(data.data(), data.size(), 0));

  std::error_code ec;
  fs::create_directories(dir_, ec);
  const fs::path final_path = path_for(key);
  // Unique per process and thread, in the same directory (rename is atomic
  // only within one file system).
  static std::atomic<uint64_t> counter{0};
  fs::path tmp = final_path;
  tmp += fmt::format(".tmp.{}.{}.{}", ::getpid(), std::hash<std::thread::id>{}(std::this_thread::get_id()), counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, final_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace kiln::codegen
