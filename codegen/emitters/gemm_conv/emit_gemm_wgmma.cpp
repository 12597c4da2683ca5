#include "codegen/emitters/gemm_conv/emit_gemm_wgmma.h"

#include <xxhash.h>

#include <map>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

// codegen/core/wgmma.cuh and mma.cuh (cp.async), embedded at build time.
constexpr std::string_view kWgmma =
#include "wgmma.inc"
    ;

constexpr int kBK = 64;                 // 64 16-bit elements: one 128-byte swizzle row
constexpr int64_t kTargetBlocks = 132;  // one wave on an H100

// The kernel; @KEY@ are substituted, @NAME@ last (it names the hash).
constexpr std::string_view kKernel = R"(namespace @NAME@_ep {
enum : int { kM = @M@, kN = @N@, kK = @K@ };  // an enum: no unused-variable warnings
@EPILOGUE@
}  // namespace @NAME@_ep
extern "C" __global__ void __launch_bounds__(@THREADS@) @NAME@(KILN_PTR(@TOUT@) out, KILN_PTR(const @T@) a,
    KILN_PTR(const @T@) b@EXTRA_PARAMS@) {
  constexpr int M = @M@, N = @N@, K = @K@;
  constexpr int BM = @BM@, BN = @BN@, BK = @BK@, STAGES = @STAGES@, THREADS = @THREADS@;
  constexpr int A_STAGE = BM * BK, B_STAGE = BN * BK;  // elements; multiples of 512 (1024 bytes)
  constexpr int KT = (K + BK - 1) / BK;
  KILN_DYNAMIC_SHARED(@T@, smem_raw);
  // The 128-byte swizzle repeats every 1024 bytes of the shared window: the
  // stages start at such a boundary (the launch adds 1024 bytes of slack).
  const unsigned window = kiln_wgmma_smem_addr(smem_raw);
  const int align = static_cast<int>(((window + 1023u) & ~1023u) - window) / 2;
  const auto smem = smem_raw + align;
  const unsigned smem_addr = window + 2u * align;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const long long batch = blockIdx.z;
  a += batch * @A_BSTRIDE@LL;
  b += batch * @B_BSTRIDE@LL;
  const @T@ zero = @ZERO@;
  (void)zero;
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;

  // Element (r, k) of a [rows][BK] stage (K-major, 128-byte swizzle) is at
  // r * BK + (((k / 8) ^ (r % 8)) * 8) + k % 8.
  auto load_tile = [&](int s, int kt) {
    const auto as = smem + s * (A_STAGE + B_STAGE);
    const auto bs = as + A_STAGE;
    const int k0 = kt * BK;
#pragma unroll
    for (int c = tid; c < BM * BK / 8; c += THREADS) {
      const int r = c / (BK / 8), kc = c % (BK / 8);
      const int gm = m0 + r, gk = k0 + kc * 8;
      const auto dst = as + r * BK + ((kc ^ (r % 8)) * 8);
@LOAD_A@
    }
#pragma unroll
    for (int c = tid; c < @B_CHUNKS@; c += THREADS) {
@LOAD_B@
    }
  };

  // The pipeline: STAGES - 1 tiles in flight while one is multiplied.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_tile(s, s);
    kiln_cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    kiln_cp_async_wait<STAGES - 2>();  // tile kt has landed (this thread's copies) ...
    kiln_fence_proxy_async_shared();   // ... and is visible to the async proxy (wgmma) ...
    __syncthreads();                   // ... everyone's; and stage (kt - 1) % STAGES is free
    if (kt + STAGES - 1 < KT) load_tile((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    kiln_cp_async_commit();
    const unsigned stage = smem_addr + 2u * static_cast<unsigned>((kt % STAGES) * (A_STAGE + B_STAGE));
    const unsigned a_addr = stage + 2u * static_cast<unsigned>(wg * 64 * BK), b_addr = stage + 2u * A_STAGE;
    kiln_wgmma_fence_acc(acc);
    kiln_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)  // k16 step kk: 32 bytes along the swizzled rows
      kiln_wgmma_m64k16<BN, @BF16@>(acc, kiln_wgmma_desc(a_addr + 32u * kk, 16u, 1024u, KILN_WGMMA_SWIZZLE_128B),
                                    kiln_wgmma_desc(b_addr + 32u * kk, 16u, 1024u, KILN_WGMMA_SWIZZLE_128B), 1);
    kiln_wgmma_commit();
    kiln_wgmma_wait<0>();
    kiln_wgmma_fence_acc(acc);
  }
  kiln_cp_async_wait<0>();

  // d_i of the m64nNk16 accumulator: row 16 warp + g + 8 ((i >> 1) & 1), col 8 (i >> 2) + 2 c + (i & 1).
  const int g = lane >> 2, c4 = lane % 4;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    const int row = m0 + wg * 64 + 16 * warp + g + 8 * ((i >> 1) & 1);
    const int col = n0 + 8 * (i >> 2) + 2 * c4 + (i & 1);
    if (row < M && col < N) @NAME@_ep::kiln_epilogue(out, batch, row, col, acc[i]@EXTRA_ARGS@);
  }
}
)";

}  // namespace

std::string_view wgmma_prelude() { return kWgmma; }

GemmTcKernel emit_gemm_wgmma(const GemmTcSpec& s) {
  const std::string label = sanitize_identifier(s.label);
  if (s.dtype != DType::F16 && s.dtype != DType::BF16)
    unsupported("codegen: {}: wgmma GEMM of {} inputs (f16 and bf16 only)", label, dtype_name(s.dtype));
  if (s.batch < 1 || s.m < 1 || s.n < 1 || s.k < 1)
    fail("codegen: {}: GEMM sizes batch {} M {} N {} K {} must be positive", label, s.batch, s.m, s.n, s.k);
  const int64_t limit = (int64_t{1} << 31) - 1;
  if (s.m * s.k > limit || s.k * s.n > limit || s.m * s.n > limit || s.batch > 65535)
    unsupported(
        "codegen: {}: GEMM {}x{}x{} (batch {}): a matrix of 2^31 elements or more, or more than 65535 "
        "batches",
        label, s.m, s.n, s.k, s.batch);
  const int64_t a_stride = s.a_batch_stride < 0 ? s.m * s.k : s.a_batch_stride;
  const int64_t b_stride = s.b_batch_stride < 0 ? s.k * s.n : s.b_batch_stride;
  if (a_stride < 0 || b_stride < 0) fail("codegen: {}: negative batch stride", label);

  // Tiles: 128 x 128 (two warpgroups) unless that leaves an H100 with less
  // than one wave of blocks; then N, then M halves to 64.
  auto blocks = [&](int bm, int bn) { return s.batch * ((s.m + bm - 1) / bm) * ((s.n + bn - 1) / bn); };
  int bm = s.m <= 64 ? 64 : 128, bn = s.n <= 64 ? 64 : 128;
  if (bn == 128 && blocks(bm, bn) < kTargetBlocks) bn = 64;
  if (bm == 128 && blocks(bm, bn) < kTargetBlocks) bm = 64;
  if (s.bm) bm = s.bm;
  if (s.bn) bn = s.bn;
  if ((bm != 64 && bm != 128) || (bn != 64 && bn != 128 && bn != 256))
    fail("codegen: {}: wgmma GEMM tile {}x{} (bm 64 or 128, bn 64, 128 or 256)", label, bm, bn);
  const int stages = s.stages ? s.stages : 4;
  if (stages < 2 || stages > 6) fail("codegen: {}: {} pipeline stages (2 to 6)", label, stages);
  GemmTcKernel k;
  k.bm = bm;
  k.bn = bn;
  k.bk = kBK;
  k.stages = stages;
  k.warps = bm / 64 * 4;
  k.block = static_cast<unsigned>(32 * k.warps);
  k.grid[0] = static_cast<unsigned>((s.n + bn - 1) / bn);
  k.grid[1] = static_cast<unsigned>((s.m + bm - 1) / bm);
  k.grid[2] = static_cast<unsigned>(s.batch);
  if (k.grid[1] > 65535 || k.grid[0] > 65535)
    unsupported("codegen: {}: GEMM {}x{}: more than 65535 tiles of {}x{} along M or N", label, s.m, s.n, bm, bn);
  k.shared_bytes = static_cast<size_t>(stages) * static_cast<size_t>((bm + bn) * kBK) * 2 + 1024;
  if (k.shared_bytes > 227 * 1024)
    fail("codegen: {}: wgmma GEMM tile {}x{} with {} stages needs {} bytes of shared memory (227 KiB at most)", label,
         bm, bn, stages, k.shared_bytes);
  k.counts = {s.batch * s.m * s.n, (s.batch - 1) * a_stride + s.m * s.k, (s.batch - 1) * b_stride + s.k * s.n};

  // 16-byte cp.async needs rows (and batch offsets) that are multiples of 8 elements.
  const bool a_vec = s.k % 8 == 0 && a_stride % 8 == 0;
  const bool b_vec = s.b_transposed && s.k % 8 == 0 && b_stride % 8 == 0;
  const std::string load_a =
      a_vec ? "      const bool ok = gm < M && gk < K;\n"
              "      kiln_cp_async16_zfill(dst, a + (ok ? gm * K + gk : 0), ok ? 16 : 0);"
            : "#pragma unroll\n"
              "      for (int j = 0; j < 8; ++j) dst[j] = (gm < M && gk + j < K) ? a[gm * K + gk + j] : zero;";
  std::string load_b, b_chunks;
  if (s.b_transposed) {  // rows n of K elements: as A
    b_chunks = "BN * BK / 8";
    load_b =
        "      const int r = c / (BK / 8), kc = c % (BK / 8);\n"
        "      const int gn = n0 + r, gk = k0 + kc * 8;\n"
        "      const auto dst = bs + r * BK + ((kc ^ (r % 8)) * 8);\n";
    load_b += b_vec ? "      const bool ok = gn < N && gk < K;\n"
                      "      kiln_cp_async16_zfill(dst, b + (ok ? gn * K + gk : 0), ok ? 16 : 0);"
                    : "#pragma unroll\n"
                      "      for (int j = 0; j < 8; ++j) dst[j] = (gn < N && gk + j < K) ? b[gn * K + gk + j] : zero;";
  } else {  // rows k of N elements: 8 n of one k, transposed into the K-major stage
    b_chunks = "BK * BN / 8";
    load_b =
        "      const int r = c / (BN / 8), nc = (c % (BN / 8)) * 8;\n"
        "      const int gk = k0 + r, gn = n0 + nc;\n"
        "#pragma unroll\n"
        "      for (int j = 0; j < 8; ++j) {\n"
        "        const int n = nc + j;\n"
        "        bs[n * BK + (((r / 8) ^ (n % 8)) * 8) + r % 8] = (gk < K && gn + j < N) ? b[gk * N + gn + j] : zero;\n"
        "      }";
  }

  const std::string tin(cuda_storage_type(s.dtype)), tout(cuda_storage_type(s.out_dtype));
  std::string extra_params, extra_args, epilogue = s.epilogue.code;
  for (size_t i = 0; i < s.epilogue.operands.size(); ++i) {
    extra_params += fmt::format(", KILN_PTR(const {}) e{}", cuda_storage_type(s.epilogue.operands[i].dtype), i);
    extra_args += fmt::format(", e{}", i);
  }
  if (epilogue.empty()) {
    if (!s.epilogue.operands.empty()) fail("codegen: {}: epilogue operands without epilogue code", label);
    epilogue = fmt::format(
        "__device__ __forceinline__ void kiln_epilogue(KILN_PTR({}) out, long long batch, int row, int col, float acc) "
        "{{\n  out[(batch * kM + row) * kN + col] = {};\n}}",
        tout, cuda_store(s.out_dtype, "acc"));
  }
  const std::map<std::string, std::string> vars = {
      {"M", std::to_string(s.m)},
      {"N", std::to_string(s.n)},
      {"K", std::to_string(s.k)},
      {"BM", std::to_string(bm)},
      {"BN", std::to_string(bn)},
      {"BK", std::to_string(kBK)},
      {"STAGES", std::to_string(stages)},
      {"THREADS", std::to_string(k.block)},
      {"T", tin},
      {"TOUT", tout},
      {"A_BSTRIDE", std::to_string(a_stride)},
      {"B_BSTRIDE", std::to_string(b_stride)},
      {"ZERO", cuda_store(s.dtype, "0.0f")},
      {"LOAD_A", load_a},
      {"LOAD_B", load_b},
      {"B_CHUNKS", b_chunks},
      {"BF16", s.dtype == DType::BF16 ? "true" : "false"},
      {"EXTRA_PARAMS", extra_params},
      {"EXTRA_ARGS", extra_args},
  };
  std::string body =
      fmt::format("// {}: wgmma GEMM (sm_90a) [{}] {}x{}x{} {}{} -> {}, tile {}x{}x{}, {} stages, {} warpgroups\n",
                  label, s.batch, s.m, s.n, s.k, dtype_name(s.dtype), s.b_transposed ? " B^T" : "",
                  dtype_name(s.out_dtype), bm, bn, kBK, stages, bm / 64);
  std::string kernel(kKernel);
  for (const auto& [key, value] : vars) kernel = replace_all(kernel, "@" + key + "@", value);
  body += kernel;

  // Simulator entry (as emit_gemm_tc's).
  body += "#ifdef KILN_SIM\n";
  body +=
      "extern \"C\" int @NAME@_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, "
      "const long long* counts, std::string* error) {\n  try {\n";
  body += "    ::kiln::sim::launch(*cfg, @NAME@";
  body += fmt::format(",\n        ::kiln::sim::arg(static_cast<{}*>(buffers[0]), counts[0], \"out\")", tout);
  body += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[1]), counts[1], \"a\")", tin);
  body += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[2]), counts[2], \"b\")", tin);
  for (size_t i = 0; i < s.epilogue.operands.size(); ++i)
    body += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[{}]), counts[{}], \"{}\")",
                        cuda_storage_type(s.epilogue.operands[i].dtype), 3 + i, 3 + i,
                        sanitize_identifier(s.epilogue.operands[i].name));
  body += ");\n    return 0;\n";
  body += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  body += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";

  // The name hashes the body and the epilogue; the epilogue (user code, may
  // hold '@') goes in after the name.
  const std::string hashed = body + epilogue;
  k.name = fmt::format("kiln_gemm_wgmma_{}_{:016x}", label, XXH64(hashed.data(), hashed.size(), 0));
  std::string named = replace_all(body, "@NAME@", k.name);
  const size_t at = named.find("@EPILOGUE@");
  KILN_CHECK(at != std::string::npos, "codegen: the wgmma GEMM template lost its epilogue slot");
  named.replace(at, 10, epilogue);

  std::string prelude = "#ifndef KILN_SIM\n";
  prelude += s.dtype == DType::F16 || s.out_dtype == DType::F16 ? "#include <cuda_fp16.h>\n" : "";
  prelude += s.dtype == DType::BF16 || s.out_dtype == DType::BF16 ? "#include <cuda_bf16.h>\n" : "";
  prelude += "#endif\n";
  k.source = prelude + std::string(kKernelPrelude) + std::string(mma_prelude()) + std::string(kWgmma) + named;
  for (const GemmOperand& o : s.epilogue.operands) k.counts.push_back(o.count);
  return k;
}

}  // namespace kiln::codegen
