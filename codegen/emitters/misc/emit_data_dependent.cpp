#include "codegen/emitters/misc/emit_data_dependent.h"

#include <algorithm>

#include <fmt/format.h>

#include "codegen/launch_fit.h"
#include "codegen/core/emit_expr.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

constexpr unsigned kWantedBlock = 256;

void finish(SimpleKernel& k, const std::string& label, std::string body) {
  body += kernel_sim_entry(k.params);
  std::vector<DType> dts;
  for (const KernelParam& p : k.params) dts.push_back(p.dtype);
  k.source = finish_kernel_source("kiln_dd", label, body, dts, k.name);
}

bool nonzero_dtype_supported(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F64:
    case DType::F16:
    case DType::BF16:
    case DType::I64:
    case DType::I32:
    case DType::I16:
    case DType::I8:
    case DType::U64:
    case DType::U32:
    case DType::U16:
    case DType::U8:
    case DType::Bool:
      return true;
    default:
      return false;
  }
}

// A float as a CUDA literal that reads back to the same float ("0.0f", not "0f").
std::string float_literal(float v) {
  std::string s = fmt::format("{:.9g}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s + "f";
}

}  // namespace

SimpleKernel emit_nonzero_bounded(const TensorType& x, const std::vector<TensorType>& results) {
  const int kBlock = static_cast<int>(block_threads(kWantedBlock));  // the one decision (codegen/launch_fit.h)
  if (!nonzero_dtype_supported(x.dtype))
    unsupported("codegen: nonzero: {} input (float, integer and bool dtypes are emitted)", dtype_name(x.dtype));
  const int64_t n = x.numel();
  const int rank = std::max(x.rank(), 1);
  const Shape shape = x.rank() == 0 ? Shape{1} : x.shape;
  if (results.size() != 2 || results[0] != TensorType(DType::I64, {rank, n}) ||
      results[1] != TensorType(DType::I64, {}))
    fail("codegen: nonzero: the bounded form of {} gives i64[{},{}] and i64[], got {} results", x.str(), rank, n,
         results.size());
  SimpleKernel k;
  k.params = {{DType::I64, true, "out"}, {DType::I64, true, "count"}, {x.dtype, false, "x"}};
  k.grid = 1;  // always: the count is written even for an empty input
  k.block = kBlock;
  std::string b = fmt::format("// nonzero (bounded): coordinates of the non-zero elements of {} into i64[{},{}]\n",
                              x.str(), rank, n);
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(k.params));
  b += fmt::format("  __shared__ long long scan[{}];\n", kBlock);
  b += "  long long base = 0;  // non-zeros before this chunk (the same in every thread)\n";
  b += fmt::format("  for (long long start = 0; start < {0}LL; start += {1}) {{\n", n, kBlock);
  b += "    const long long e = start + threadIdx.x;\n";
  // NaN != 0 counts, -0.0 == 0 does not: the reference's mask.
  b += fmt::format("    const int flag = e < {}LL && {} != 0;\n", n, cuda_load(x.dtype, "x[e]"));
  b += "    scan[threadIdx.x] = flag;\n    __syncthreads();\n";
  b += fmt::format("    for (int off = 1; off < {}; off <<= 1) {{\n", kBlock);
  b += "      const long long add = threadIdx.x >= off ? scan[threadIdx.x - off] : 0;\n";
  b += "      __syncthreads();\n      scan[threadIdx.x] += add;\n      __syncthreads();\n    }\n";
  b += "    if (flag) {\n";
  b += "      const long long col = base + scan[threadIdx.x] - 1;\n";
  b += "      long long rest = e;\n";
  for (int d = rank - 1; d >= 0; --d) {
    b += fmt::format("      out[{}LL * {}LL + col] = rest % {}LL;\n", d, n, shape[d]);
    if (d > 0) b += fmt::format("      rest /= {}LL;\n", shape[d]);
  }
  b += "    }\n";
  b += fmt::format("    base += scan[{}];\n", kBlock - 1);
  b += "    __syncthreads();  // every thread has read the scan before the next chunk writes it\n  }\n";
  b += fmt::format("  for (long long c = base + threadIdx.x; c < {}LL; c += {})\n", n, kBlock);
  b += fmt::format("    for (int d = 0; d < {}; ++d) out[d * {}LL + c] = 0;\n", rank, n);
  b += "  if (threadIdx.x == 0) count[0] = base;\n}\n";
  finish(k, "nonzero", b);
  return k;
}

SimpleKernel emit_nms_bounded(const AttrMap& attrs, const TensorType& boxes, const TensorType& scores,
                              const std::vector<TensorType>& results, bool valid_count) {
  const int kBlock = static_cast<int>(block_threads(kWantedBlock));  // the one decision (codegen/launch_fit.h)
  if (boxes.dtype != DType::F32 || scores.dtype != DType::F32)
    unsupported("codegen: non_max_suppression: boxes {} and scores {} (f32 is emitted)", boxes.str(), scores.str());
  if (boxes.rank() != 3 || scores.rank() != 3 || boxes.shape[2] != 4 || scores.shape[0] != boxes.shape[0] ||
      scores.shape[2] != boxes.shape[1])
    fail("codegen: non_max_suppression: boxes {} and scores {}", boxes.str(), scores.str());
  const int64_t B = scores.shape[0], C = scores.shape[1], n = scores.shape[2];
  const int64_t per_class = attrs.get_int("max_output_boxes_per_class", 0);
  const int64_t bound = B * C * std::min(per_class, n);
  if (results.size() != 2 || results[0] != TensorType(DType::I64, {bound, 3}) ||
      results[1] != TensorType(DType::I64, {}))
    fail("codegen: non_max_suppression: the bounded form gives i64[{},3] and i64[], got {} results", bound,
         results.size());
  const bool center = attrs.get_int("center_point_box", 0) != 0;
  const std::string iou = float_literal(attrs.get_float("iou_threshold", 0));
  const bool has_score = attrs.has("score_threshold");
  const std::string score = float_literal(attrs.get_float("score_threshold", 0));
  SimpleKernel k;
  k.params = {{DType::I64, true, "sel"},
              {DType::I64, true, "count"},
              {DType::F32, false, "boxes"},
              {DType::F32, false, "scores"}};
  if (valid_count) k.params.push_back({DType::I64, false, "valid"});
  k.params.push_back({DType::I64, true, "ws"});
  k.scratch = {TensorType(DType::I64, {std::max<int64_t>(2 * n, 1)})};
  k.grid = 1;  // always: the count is written even when nothing is selected
  k.block = kBlock;
  std::string b = fmt::format(
      "// non_max_suppression (bounded): boxes {} scores {}, at most {} per class, iou > {}{}, into i64[{},3]\n",
      boxes.str(), scores.str(), per_class, iou, has_score ? ", score > " + score : "", bound);
  // The reference's make_box and suppresses (ops/misc_ops.cpp), operation for operation.
  b += "__device__ void @NAME@_box(const float* p, float* o) {\n";
  if (center) {
    b += "  const float xc = p[0], yc = p[1], w = p[2], h = p[3];\n";
    b += "  o[0] = yc - h / 2;\n  o[1] = xc - w / 2;\n  o[2] = yc + h / 2;\n  o[3] = xc + w / 2;\n}\n";
  } else {
    b += "  o[0] = fminf(p[0], p[2]);\n  o[1] = fminf(p[1], p[3]);\n";
    b += "  o[2] = fmaxf(p[0], p[2]);\n  o[3] = fmaxf(p[1], p[3]);\n}\n";
  }
  b += "__device__ int @NAME@_suppresses(const float* a, const float* c) {\n";
  b += "  const float aa = (a[2] - a[0]) * (a[3] - a[1]), ac = (c[2] - c[0]) * (c[3] - c[1]);\n";
  b += "  if (aa <= 0 || ac <= 0) return 0;\n";
  b += "  const float iy1 = fmaxf(a[0], c[0]), ix1 = fmaxf(a[1], c[1]), iy2 = fminf(a[2], c[2]), ix2 = "
       "fminf(a[3], c[3]);\n";
  b += "  const float inter = fmaxf(0.0f, iy2 - iy1) * fmaxf(0.0f, ix2 - ix1);\n";
  b += "  if (inter <= 0) return 0;\n";
  b += "  const float iou = inter / (aa + ac - inter);\n";
  b += fmt::format("  return iou > {};\n}}\n", iou);
  // A candidate scores above the threshold, if any, and lies before the
  // valid box count, if given (the padding past it is never a candidate).
  std::string cand = has_score ? "(v > " + score + ")" : "1";
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(k.params));
  b += "  __shared__ long long cands;\n";
  if (valid_count) b += fmt::format("  const long long nv = valid[0] < {0}LL ? valid[0] : {0}LL;\n", n);
  b += "  long long total = 0;  // rows written so far (the same in every thread)\n";
  b += fmt::format("  for (long long bc = 0; bc < {}LL; ++bc) {{\n", B * C);
  b += fmt::format("    const long long bat = bc / {0}LL, cls = bc % {0}LL;\n", C);
  b += fmt::format("    const long long s0 = bc * {0}LL, b0 = bat * {0}LL * 4;\n", n);
  b += "    // Rank each candidate: those ahead of it in a stable descending sort.\n";
  b += fmt::format("    for (long long i = threadIdx.x; i < {}LL; i += {}) {{\n", n, kBlock);
  b += "      const float v = scores[s0 + i];\n";
  b += fmt::format("      if (!{}{}) continue;\n", cand, valid_count ? " || i >= nv" : "");
  b += "      const float si = v;\n      long long r = 0;\n";
  b += fmt::format("      for (long long j = 0; j < {}LL; ++j) {{\n", n);
  b += "        const float v = scores[s0 + j];\n";
  b += fmt::format("        if ({}{} && (v > si || (v == si && j < i))) ++r;\n      }}\n", cand,
                   valid_count ? " && j < nv" : "");
  b += "      ws[r] = i;\n    }\n";
  b += "    if (threadIdx.x == 0) {\n      long long c = 0;\n";
  b += fmt::format("      for (long long j = 0; j < {}LL; ++j) {{\n", n);
  b += fmt::format("        const float v = scores[s0 + j];\n        c += {}{};\n      }}\n", cand,
                   valid_count ? " && j < nv" : "");
  b += "      cands = c;\n    }\n    __syncthreads();\n";
  b += "    long long kept = 0;\n";
  b += fmt::format("    for (long long p = 0; p < cands && kept < {}LL; ++p) {{\n", per_class);
  b += "      const long long i = ws[p];\n";
  b += "      float bi[4], bk[4], raw[4];\n";
  b += "      for (int q = 0; q < 4; ++q) raw[q] = boxes[b0 + i * 4 + q];\n";
  b += "      @NAME@_box(raw, bi);\n";
  b += "      int sup = 0;\n";
  b += fmt::format("      for (long long q = threadIdx.x; q < kept && !sup; q += {}) {{\n", kBlock);
  b += fmt::format("        const long long j = ws[{}LL + q];\n", n);
  b += "        for (int t = 0; t < 4; ++t) raw[t] = boxes[b0 + j * 4 + t];\n";
  b += "        @NAME@_box(raw, bk);\n        sup = @NAME@_suppresses(bk, bi);\n      }\n";
  b += "      sup = __syncthreads_or(sup);\n";
  b += "      if (sup) continue;\n";
  b += "      if (threadIdx.x == 0) {\n";
  b += fmt::format("        ws[{}LL + kept] = i;\n", n);
  b += "        sel[total * 3] = bat;\n        sel[total * 3 + 1] = cls;\n        sel[total * 3 + 2] = i;\n      }\n";
  b += "      ++kept;\n      ++total;\n      __syncthreads();  // the kept box is visible to all\n    }\n";
  b += "    __syncthreads();  // the order is read before the next class writes it\n  }\n";
  b += fmt::format("  for (long long r = total + threadIdx.x; r < {}LL; r += {})\n", bound, kBlock);
  b += "    sel[r * 3] = sel[r * 3 + 1] = sel[r * 3 + 2] = 0;\n";
  b += "  if (threadIdx.x == 0) count[0] = total;\n}\n";
  finish(k, "nms", b);
  return k;
}

}  // namespace kiln::codegen
