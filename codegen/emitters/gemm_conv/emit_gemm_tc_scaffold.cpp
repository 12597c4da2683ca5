#include "codegen/emitters/gemm_conv/emit_gemm_tc_scaffold.h"

#include <xxhash.h>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

constexpr int64_t kTargetBlocks = 132;  // one wave on an H100

// The pieces of with_tc_kernel_pieces (kernel text: their bytes are in the kernels' names).
constexpr std::string_view kKernelHead = R"(namespace @NAME@_ep {
enum : int { kM = @M@, kN = @N@, kK = @K@ };  // an enum: no unused-variable warnings
@EPILOGUE@
}  // namespace @NAME@_ep
extern "C" __global__ void __launch_bounds__(@THREADS@) @NAME@(KILN_PTR(@TOUT@) out, KILN_PTR(const @T@) a,
    KILN_PTR(const @T@) b@EXTRA_PARAMS@) {
  constexpr int M = @M@, N = @N@, K = @K@;
  constexpr int BM = @BM@, BN = @BN@, BK = @BK@, STAGES = @STAGES@, THREADS = @THREADS@;)";
constexpr std::string_view kBlockOrigin = R"(  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const long long batch = blockIdx.z;
  a += batch * @A_BSTRIDE@LL;
  b += batch * @B_BSTRIDE@LL;
  const @T@ zero = @ZERO@;
  (void)zero;)";
constexpr std::string_view kPipelineFill = R"(  // The pipeline: STAGES - 1 tiles in flight while one is multiplied.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_tile(s, s);
    kiln_cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    kiln_cp_async_wait<STAGES - 2>();  // tile kt has landed (this thread's copies) ...)";

}  // namespace

TcGemmFrame check_tc_gemm_spec(const GemmTcSpec& s, std::string_view what) {
  TcGemmFrame f;
  f.label = sanitize_identifier(s.label);
  const std::string& label = f.label;
  if (s.dtype != DType::F16 && s.dtype != DType::BF16)
    unsupported("codegen: {}: {} of {} inputs (f16 and bf16 only)", label, what, dtype_name(s.dtype));
  if (s.batch < 1 || s.m < 1 || s.n < 1 || s.k < 1)
    fail("codegen: {}: GEMM sizes batch {} M {} N {} K {} must be positive", label, s.batch, s.m, s.n, s.k);
  const int64_t limit = (int64_t{1} << 31) - 1;
  if (s.m * s.k > limit || s.k * s.n > limit || s.m * s.n > limit || s.batch > 65535)
    unsupported(
        "codegen: {}: GEMM {}x{}x{} (batch {}): a matrix of 2^31 elements or more, or more than 65535 "
        "batches",
        label, s.m, s.n, s.k, s.batch);
  f.a_stride = s.a_batch_stride < 0 ? s.m * s.k : s.a_batch_stride;
  f.b_stride = s.b_batch_stride < 0 ? s.k * s.n : s.b_batch_stride;
  if (f.a_stride < 0 || f.b_stride < 0) fail("codegen: {}: negative batch stride", label);
  return f;
}

void default_tc_tile(const GemmTcSpec& s, int* bm, int* bn) {
  auto blocks = [&](int tm, int tn) { return s.batch * ((s.m + tm - 1) / tm) * ((s.n + tn - 1) / tn); };
  *bm = s.m <= 64 ? 64 : 128;
  *bn = s.n <= 64 ? 64 : 128;
  if (*bn == 128 && blocks(*bm, *bn) < kTargetBlocks) *bn = 64;
  if (*bm == 128 && blocks(*bm, *bn) < kTargetBlocks) *bm = 64;
  if (s.bm) *bm = s.bm;
  if (s.bn) *bn = s.bn;
}

void tc_grid_and_counts(const GemmTcSpec& s, const TcGemmFrame& f, int bm, int bn, GemmTcKernel& k) {
  k.grid[0] = static_cast<unsigned>((s.n + bn - 1) / bn);
  k.grid[1] = static_cast<unsigned>((s.m + bm - 1) / bm);
  k.grid[2] = static_cast<unsigned>(s.batch);
  if (k.grid[1] > 65535 || k.grid[0] > 65535)
    unsupported("codegen: {}: GEMM {}x{}: more than 65535 tiles of {}x{} along M or N", f.label, s.m, s.n, bm, bn);
  // Buffers and their extents: a batch stride past the buffer is an error.
  k.counts = {s.batch * s.m * s.n, (s.batch - 1) * f.a_stride + s.m * s.k, (s.batch - 1) * f.b_stride + s.k * s.n};
}

TcEpilogueText tc_epilogue_text(const GemmTcSpec& s, const std::string& label) {
  TcEpilogueText e;
  e.code = s.epilogue.code;
  for (size_t i = 0; i < s.epilogue.operands.size(); ++i) {
    e.params += fmt::format(", KILN_PTR(const {}) e{}", cuda_storage_type(s.epilogue.operands[i].dtype), i);
    e.args += fmt::format(", e{}", i);
  }
  if (e.code.empty()) {
    if (!s.epilogue.operands.empty()) fail("codegen: {}: epilogue operands without epilogue code", label);
    e.code = fmt::format(
        "__device__ __forceinline__ void kiln_epilogue(KILN_PTR({}) out, long long batch, int row, int col, float acc) "
        "{{\n  out[(batch * kM + row) * kN + col] = {};\n}}",
        cuda_storage_type(s.out_dtype), cuda_store(s.out_dtype, "acc"));
  }
  return e;
}

std::map<std::string, std::string> tc_common_vars(const GemmTcSpec& s, const TcGemmFrame& f, const GemmTcKernel& k,
                                                  const TcEpilogueText& ep, std::string_view epilogue_slot) {
  return {
      {"NAME", "@NAME@"},
      {"M", std::to_string(s.m)},
      {"N", std::to_string(s.n)},
      {"K", std::to_string(s.k)},
      {"BM", std::to_string(k.bm)},
      {"BN", std::to_string(k.bn)},
      {"BK", std::to_string(k.bk)},
      {"STAGES", std::to_string(k.stages)},
      {"THREADS", std::to_string(k.block)},
      {"T", std::string(cuda_storage_type(s.dtype))},
      {"TOUT", std::string(cuda_storage_type(s.out_dtype))},
      {"A_BSTRIDE", std::to_string(f.a_stride)},
      {"B_BSTRIDE", std::to_string(f.b_stride)},
      {"ZERO", cuda_store(s.dtype, "0.0f")},
      {"EXTRA_PARAMS", ep.params},
      {"EXTRA_ARGS", ep.args},
      {"EPILOGUE", std::string(epilogue_slot)},
  };
}

std::string with_tc_kernel_pieces(std::string_view kernel) {
  std::string text(kernel);
  for (const auto& [key, piece] :
       {std::pair{"@TC_KERNEL_HEAD@", kKernelHead}, std::pair{"@TC_BLOCK_ORIGIN@", kBlockOrigin},
        std::pair{"@TC_PIPELINE_FILL@", kPipelineFill}}) {
    const size_t at = text.find(key);
    KILN_CHECK(at != std::string::npos, "codegen: a tensor-core GEMM template without {}", key);
    text.replace(at, std::string_view(key).size(), piece);
  }
  return text;
}

std::string substitute(std::string_view text, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t pos = 0;;) {
    size_t at = text.find('@', pos);
    if (at == std::string_view::npos) {
      out.append(text.substr(pos));
      return out;
    }
    size_t end = text.find('@', at + 1);
    KILN_CHECK(end != std::string_view::npos, "codegen: unterminated @KEY@ in the GEMM template");
    auto it = vars.find(std::string(text.substr(at + 1, end - at - 1)));
    KILN_CHECK(it != vars.end(), "codegen: unknown key {} in the GEMM template", text.substr(at, end - at + 1));
    out.append(text.substr(pos, at - pos));
    out += it->second;
    pos = end + 1;
  }
}

std::string tc_sim_entry(const GemmTcSpec& s) {
  const std::string tin(cuda_storage_type(s.dtype)), tout(cuda_storage_type(s.out_dtype));
  std::string b = "#ifdef KILN_SIM\n";
  b += "extern \"C\" int @NAME@_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, "
       "const long long* counts, std::string* error) {\n  try {\n";
  b += "    ::kiln::sim::launch(*cfg, @NAME@";
  b += fmt::format(",\n        ::kiln::sim::arg(static_cast<{}*>(buffers[0]), counts[0], \"out\")", tout);
  b += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[1]), counts[1], \"a\")", tin);
  b += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[2]), counts[2], \"b\")", tin);
  for (size_t i = 0; i < s.epilogue.operands.size(); ++i)
    b += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[{}]), counts[{}], \"{}\")",
                     cuda_storage_type(s.epilogue.operands[i].dtype), 3 + i, 3 + i,
                     sanitize_identifier(s.epilogue.operands[i].name));
  b += ");\n    return 0;\n";
  b += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  b += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";
  return b;
}

void finish_tc_kernel(const GemmTcSpec& s, const std::string& label, std::string_view prefix, const std::string& body,
                      const std::string& epilogue, std::string_view epilogue_slot, const std::string& preludes,
                      GemmTcKernel& k) {
  const std::string hashed = body + epilogue;
  k.name = fmt::format("{}_{}_{:016x}", prefix, label, XXH64(hashed.data(), hashed.size(), 0));
  std::string named = replace_all(body, "@NAME@", k.name);
  const size_t at = named.find(epilogue_slot);
  KILN_CHECK(at != std::string::npos, "codegen: the {} template lost its epilogue slot", prefix);
  named.replace(at, epilogue_slot.size(), epilogue);

  std::string includes = "#ifndef KILN_SIM\n";
  includes += s.dtype == DType::F16 || s.out_dtype == DType::F16 ? "#include <cuda_fp16.h>\n" : "";
  includes += s.dtype == DType::BF16 || s.out_dtype == DType::BF16 ? "#include <cuda_bf16.h>\n" : "";
  includes += "#endif\n";
  k.source = includes + preludes + named;
  for (const GemmOperand& o : s.epilogue.operands) k.counts.push_back(o.count);
}

}  // namespace kiln::codegen
