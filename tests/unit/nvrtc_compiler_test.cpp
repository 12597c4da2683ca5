// codegen/nvrtc_compiler + codegen/kernel_cache: NVRTC compiles without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "ir/error.h"

using namespace kiln::codegen;
namespace fs = std::filesystem;

namespace {

std::string simple_kernel(const std::string& fn, const std::string& scale = "2.0f") {
  return "extern \"C\" __global__ void " + fn +
         "(const float* x, float* y, int n) {\n"
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) y[i] = x[i] * " +
         scale + ";\n}\n";
}

const char* kHalfShared = R"(
#include <cuda_fp16.h>
extern "C" __global__ void reverse_half(const __half* a, __half* b, int n) {
  __shared__ float s[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? __half2float(a[i]) : 0.0f;
  __syncthreads();
  if (i < n) b[i] = __float2half(s[255 - threadIdx.x] * 2.0f);
}
)";

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kiln_nvrtc_XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

bool is_elf(const std::vector<uint8_t>& b) {
  return b.size() > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

}  // namespace

TEST(NvrtcCompiler, SimpleKernelSm80AndSm90) {
  for (std::string arch : {"sm_80", "sm_90"}) {
    KernelCompiler c(arch);
    auto out = c.compile({{"scale", simple_kernel("scale")}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].name, "scale");
    EXPECT_EQ(out[0].arch, arch);
    EXPECT_TRUE(is_elf(out[0].cubin)) << arch;
    EXPECT_NE(out[0].ptx.find(".entry scale"), std::string::npos) << out[0].ptx;
    EXPECT_GT(out[0].registers, 0) << out[0].log;
    EXPECT_EQ(out[0].shared_bytes, 0);
    EXPECT_EQ(out[0].spill_bytes, 0);
    EXPECT_EQ(c.nvrtc_compilations(), 1);
  }
}

TEST(NvrtcCompiler, HalfAndSharedMemory) {
  for (std::string arch : {"sm_80", "sm_90"}) {
    auto out = KernelCompiler(arch).compile({{"rev", kHalfShared}});
    EXPECT_TRUE(is_elf(out[0].cubin));
    EXPECT_NE(out[0].ptx.find("bar.sync"), std::string::npos);
    EXPECT_GT(out[0].registers, 0) << out[0].log;
    EXPECT_EQ(out[0].shared_bytes, 256 * 4) << out[0].log;  // float s[256]
  }
}

TEST(NvrtcCompiler, SyntaxErrorNamesKernelAndCarriesLog) {
  KernelCompiler c("sm_90");
  std::string bad = "extern \"C\" __global__ void k(float* y) { y[0] = undeclared_thing; }\n";
  try {
    c.compile({{"good_one", simple_kernel("g")}, {"my_broken_kernel", bad}});
    FAIL() << "expected kiln::Error";
  } catch (const kiln::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("my_broken_kernel"), std::string::npos) << m;
    EXPECT_NE(m.find("sm_90"), std::string::npos) << m;
    EXPECT_NE(m.find("identifier \"undeclared_thing\" is undefined"), std::string::npos) << m;
  }
}

TEST(NvrtcCompiler, UnsupportedArch) {
  EXPECT_THROW(KernelCompiler("sm_75"), kiln::Error);
  EXPECT_THROW(KernelCompiler("compute_90"), kiln::Error);
}

TEST(NvrtcCompiler, IdenticalSourcesCompiledOnce) {
  KernelCompiler c("sm_86");
  std::string a = simple_kernel("fa"), b = simple_kernel("fb");
  auto out = c.compile({{"k0", a}, {"k1", b}, {"k2", a}, {"k3", a}});
  EXPECT_EQ(c.nvrtc_compilations(), 2);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].name, "k0");
  EXPECT_EQ(out[2].name, "k2");
  EXPECT_EQ(out[3].name, "k3");
  EXPECT_EQ(out[0].cubin, out[2].cubin);
  EXPECT_NE(out[1].ptx.find(".entry fb"), std::string::npos);
  EXPECT_EQ(out[3].ptx.find(".entry fb"), std::string::npos);
}

TEST(NvrtcCompiler, ManyKernelsInParallelKeepOrder) {
  std::vector<KernelSource> ks;
  for (int i = 0; i < 12; ++i) ks.push_back({fmt::format("n{}", i), simple_kernel(fmt::format("f{}", i))});
  KernelCompiler c("sm_89");
  auto out = c.compile(ks);
  EXPECT_EQ(c.nvrtc_compilations(), 12);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(out[i].name, fmt::format("n{}", i));
    EXPECT_NE(out[i].ptx.find(fmt::format(".entry f{}(", i)), std::string::npos);
  }
}

TEST(NvrtcCompiler, ParsePtxasReport) {
  CompiledKernel k;
  parse_ptxas_report(
      "ptxas info    : Function properties for a\n"
      "ptxas         .     0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem\n"
      "ptxas info    : Function properties for b\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 64 registers, used 0 barriers\n",
      k);
  EXPECT_EQ(k.registers, 64);
  EXPECT_EQ(k.shared_bytes, 4096);
  EXPECT_EQ(k.spill_bytes, 20);
  parse_ptxas_report("", k);
  EXPECT_EQ(k.registers, -1);
}

TEST(KernelCache, ColdMissThenHitAcrossCompilers) {
  TempDir tmp;
  KernelCache cache(tmp.path);
  KernelCompiler c1("sm_90", &cache);
  auto a = c1.compile({{"a", kHalfShared}});
  EXPECT_EQ(c1.nvrtc_compilations(), 1);
  EXPECT_EQ(c1.cache_hits(), 0);
  KernelCompiler c2("sm_90", &cache);
  auto b = c2.compile({{"b", kHalfShared}});
  EXPECT_EQ(c2.nvrtc_compilations(), 0);
  EXPECT_EQ(c2.cache_hits(), 1);
  EXPECT_EQ(b[0].name, "b");
  EXPECT_EQ(b[0].arch, "sm_90");
  EXPECT_EQ(b[0].cubin, a[0].cubin);
  EXPECT_EQ(b[0].ptx, a[0].ptx);
  EXPECT_EQ(b[0].log, a[0].log);
  EXPECT_EQ(b[0].registers, a[0].registers);
  EXPECT_EQ(b[0].shared_bytes, 1024);
  EXPECT_EQ(b[0].spill_bytes, a[0].spill_bytes);
  // No temporary files left behind.
  int files = 0;
  for (auto& e : fs::directory_iterator(cache.dir())) {
    EXPECT_EQ(e.path().extension(), ".kernel") << e.path();
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(KernelCache, DifferentOptionsOrArchMiss) {
  TempDir tmp;
  KernelCache cache(tmp.path);
  std::string src = simple_kernel("f");
  KernelCompiler(("sm_90"), &cache).compile({{"f", src}});
  KernelCompiler other_arch("sm_80", &cache);
  other_arch.compile({{"f", src}});
  EXPECT_EQ(other_arch.nvrtc_compilations(), 1);
  KernelCompiler other_opts("sm_90", &cache, {"-DKILN_TEST=1"});
  other_opts.compile({{"f", src}});
  EXPECT_EQ(other_opts.nvrtc_compilations(), 1);
  KernelCompiler other_src("sm_90", &cache);
  other_src.compile({{"f", simple_kernel("f", "3.0f")}});
  EXPECT_EQ(other_src.nvrtc_compilations(), 1);
  KernelCompiler same("sm_90", &cache);
  same.compile({{"f", src}});
  EXPECT_EQ(same.nvrtc_compilations(), 0);
}

TEST(KernelCache, CollidingEntryMisses) {
  TempDir tmp;
  KernelCache cache(tmp.path);
  KernelCompiler c1("sm_90", &cache);
  std::string sa = simple_kernel("fa"), sb = simple_kernel("fb");
  c1.compile({{"a", sa}});
  // Plant A's (valid) entry under B's file name: as if the hashes collided.
  auto key_a = KernelCache::make_key(sa, c1.options(), "sm_90", nvrtc_version());
  auto key_b = KernelCache::make_key(sb, c1.options(), "sm_90", nvrtc_version());
  ASSERT_TRUE(fs::exists(cache.path_for(key_a)));
  fs::copy_file(cache.path_for(key_a), cache.path_for(key_b));
  EXPECT_FALSE(cache.lookup(key_b).has_value());
  KernelCompiler c2("sm_90", &cache);
  auto out = c2.compile({{"b", sb}});
  EXPECT_EQ(c2.nvrtc_compilations(), 1);
  EXPECT_NE(out[0].ptx.find(".entry fb"), std::string::npos);
  // B's entry replaced the planted one.
  auto hit = cache.lookup(key_b);
  ASSERT_TRUE(hit.has_value());
  EXPECT_NE(hit->ptx.find(".entry fb"), std::string::npos);
}

TEST(KernelCache, TruncatedOrCorruptEntryIgnoredAndRewritten) {
  TempDir tmp;
  KernelCache cache(tmp.path);
  std::string src = simple_kernel("f");
  KernelCompiler c1("sm_90", &cache);
  auto first = c1.compile({{"f", src}});
  auto key = KernelCache::make_key(src, c1.options(), "sm_90", nvrtc_version());
  fs::path p = cache.path_for(key);
  auto size = fs::file_size(p);
  fs::resize_file(p, size / 2);
  KernelCompiler c2("sm_90", &cache);
  auto second = c2.compile({{"f", src}});
  EXPECT_EQ(c2.nvrtc_compilations(), 1);
  EXPECT_EQ(second[0].cubin, first[0].cubin);
  // Rewritten: a whole, valid entry again. (Not compared by size: the stored
  // ptxas log ends with "Compile time = N ms", whose digits vary run to run.)
  auto rewritten = cache.lookup(key);
  ASSERT_TRUE(rewritten.has_value());
  EXPECT_EQ(rewritten->cubin, first[0].cubin);
  size = fs::file_size(p);
  {  // flip one byte in the middle
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size / 2));
    char ch = 0;
    f.read(&ch, 1);
    f.seekp(static_cast<std::streamoff>(size / 2));
    ch = static_cast<char>(ch ^ 0x5a);
    f.write(&ch, 1);
  }
  EXPECT_FALSE(cache.lookup(key).has_value());
  KernelCompiler c3("sm_90", &cache);
  c3.compile({{"f", src}});
  EXPECT_EQ(c3.nvrtc_compilations(), 1);
  KernelCompiler c4("sm_90", &cache);
  c4.compile({{"f", src}});
  EXPECT_EQ(c4.nvrtc_compilations(), 0);
  EXPECT_EQ(c4.cache_hits(), 1);
}

TEST(KernelCache, ConcurrentStoresNeverTearEntries) {
  TempDir tmp;
  KernelCache cache(tmp.path);
  std::string src = simple_kernel("f");
  auto k = KernelCompiler("sm_90").compile({{"f", src}})[0];
  auto key = KernelCache::make_key(src, KernelCompiler("sm_90").options(), "sm_90", nvrtc_version());
  std::atomic<int> torn{0}, hits{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        if (t % 2 == 0) {
          EXPECT_TRUE(cache.store(key, k));
        } else if (auto e = cache.lookup(key)) {
          ++hits;
          if (e->cubin != k.cubin || e->ptx != k.ptx) ++torn;
        }
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(torn, 0);
  int files = 0;
  for (auto& e : fs::directory_iterator(cache.dir())) {
    EXPECT_EQ(e.path().extension(), ".kernel") << e.path();
    ++files;
  }
  EXPECT_EQ(files, 1);
  KernelCompiler c("sm_90", &cache);
  c.compile({{"f", src}});
  EXPECT_EQ(c.nvrtc_compilations(), 0);
}

TEST(KernelCache, DirectoryFromEnvironment) {
  TempDir tmp;
  const char* old = std::getenv("KILN_CACHE_DIR");
  std::string saved = old ? old : "";
  setenv("KILN_CACHE_DIR", tmp.path.c_str(), 1);
  KernelCache cache;
  EXPECT_EQ(cache.dir(), tmp.path / "kernels");
  if (old) setenv("KILN_CACHE_DIR", saved.c_str(), 1);
  else unsetenv("KILN_CACHE_DIR");
}
