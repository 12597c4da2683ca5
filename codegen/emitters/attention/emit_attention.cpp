#include "codegen/emitters/attention/emit_attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/core/deciding_only.h"
#include "codegen/emitters/attention/attention_dims.h"
#include "codegen/emitters/attention/emit_attention_tc.h"
#include "codegen/emitters/gemm_conv/emit_epilogue.h"
#include "codegen/core/emit_expr.h"
#include "ir/error.h"
#include "ir/expr.h"
#include "ir/op_registry.h"
#include "ops/registry.h"

namespace kiln::codegen {

namespace {

// Launch heuristic constants (docs/codegen.md).
constexpr int kTargetBlocks = 132;          // SMs of an H100: below this many blocks, halve the query tile
constexpr size_t kSharedLimit = 48 * 1024;  // static shared memory without the opt-in attribute

size_t shared_bytes_for(int bq, int bk, int64_t D, int64_t Dv, size_t es) {
  return es * static_cast<size_t>(bq * (D + 1) + bk * (D + 1) + bk * std::max<int64_t>(Dv, 1) + bq * (bk + 1));
}

std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t run = 1;
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    st[d] = run;
    run *= s[d];
  }
  return st;
}

// Strides of `in` read broadcast (numpy, right-aligned) at coordinates of `out`.
std::vector<int64_t> broadcast_strides_to(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0), own = row_major_strides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : own[i];
  return st;
}

}  // namespace

AttentionKernel emit_attention(const TensorType& q, const TensorType& k, const TensorType& v, bool has_mask,
                               const TensorType& mask, const AttrMap& attrs, const AttentionEpilogue& epi) {
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4)
    fail("codegen: attention: q {}, k {}, v {} must have rank 4", q.str(), k.str(), v.str());
  if (!is_float(q.dtype) || k.dtype != q.dtype || v.dtype != q.dtype || (has_mask && mask.dtype != q.dtype))
    fail("codegen: attention: operands must share one floating dtype (q {}, k {}, v {})", q.str(), k.str(), v.str());
  const int64_t B = q.shape[0], H = q.shape[1], Sq = q.shape[2], D = q.shape[3], Sk = k.shape[2], Dv = v.shape[3];
  // Grouped-query attention: Hk key/value heads, H a multiple of them.
  const int64_t Hk = k.shape[1];
  if (k.shape[0] != B || v.shape[0] != B || v.shape[1] != Hk || k.shape[3] != D || v.shape[2] != Sk ||
      (Hk != H && (is_symbolic_dim(H) || is_symbolic_dim(Hk) || Hk <= 0 || H % Hk != 0)))
    fail("codegen: attention: q {}, k {}, v {} do not agree", q.str(), k.str(), v.str());
  const int64_t G = Hk == H ? 1 : H / Hk;
  const AttentionDims dm = AttentionDims::of(q, k, v, has_mask ? mask.shape : Shape{}, epi.sym_min, epi.sym_max,
                                             attrs.get_string("k_capacity", ""), attrs.get_string("v_capacity", ""));
  {  // at the largest shapes for a shape-generic kernel
    const int64_t b = dm.max(B), sq = dm.max(Sq), sk = dm.max(Sk);
    for (int64_t x : {b * H * sq * D, b * H * sk * D, b * H * sk * Dv, b * H * sq * Dv})
      if (x >= (int64_t{1} << 31)) unsupported("codegen: attention: operands of 2^31 elements or more");
  }
  std::vector<int64_t> ms(4, 0);
  if (has_mask) {
    if (mask.shape.size() > 4) fail("codegen: attention: mask {} has rank above 4", mask.str());
    const Shape scores = {B, H, Sq, Sk};
    for (size_t i = 0; i < mask.shape.size(); ++i)
      if (mask.shape[i] != 1 && mask.shape[i] != scores[4 - mask.shape.size() + i])
        fail("codegen: attention: mask {} does not broadcast to [{}]", mask.str(), dims_str(scores));
    ms = dm.generic ? symbolic_broadcast_strides(mask.shape, scores) : broadcast_strides_to(mask.shape, scores);
  }
  // The tensor-core kernel needs a key in every launch: a generic Sk whose
  // range reaches 0 keeps the SIMT kernel, which gives the reference's 0.
  if (attention_tc_applies(q, k, v) && dm.min(Sk) > 0) return emit_attention_tc(q, k, v, dm, has_mask, ms, attrs, epi);
  const double scale = attrs.get_float("scale", 1.0f);
  const bool causal = attrs.get_int("causal", 0) != 0;
  const bool nan_to_zero = attrs.get_int("nan_to_zero", 0) != 0;

  const bool f64 = q.dtype == DType::F64;
  const size_t es = f64 ? 8 : 4;
  const std::string T = f64 ? "double" : "float";
  const std::string EXP = f64 ? "exp" : "expf";
  const std::string INF = f64 ? "__longlong_as_double(0x7ff0000000000000LL)" : "__uint_as_float(0x7f800000u)";
  const std::string NaN = f64 ? "__longlong_as_double(0x7ff8000000000000LL)" : "__uint_as_float(0x7fc00000u)";
  const std::string scale_lit =
      f64 ? fmt::format("__longlong_as_double({:#x}LL)", std::bit_cast<uint64_t>(scale))
          : fmt::format("__uint_as_float({:#x}u)", std::bit_cast<uint32_t>(static_cast<float>(scale)));

  // Tiling (docs/codegen.md): TPR threads per query row keep at most 32
  // (f64: 16) output accumulators each; BQ query rows per block; BK keys
  // per shared-memory tile, the largest that fits 48 KiB.
  const int oc_max = f64 ? 16 : 32;
  int tpr = 4;
  while ((Dv + tpr - 1) / tpr > oc_max && tpr < 32) tpr *= 2;
  const int oc = static_cast<int>(std::max<int64_t>(1, (Dv + tpr - 1) / tpr));
  // A shape-generic kernel's tiles are chosen at the largest shapes (the
  // grid then counts the query tiles of each launch).
  const int64_t tB = dm.max(B), tSq = dm.max(Sq), tSk = dm.max(Sk);
  int bq = 32;
  if (tSq <= 8) bq = 8;
  else if (tSq <= 16 || tB * H * ((tSq + 31) / 32) < kTargetBlocks) bq = 16;
  int bk = static_cast<int>(std::min<int64_t>(64, std::max<int64_t>(8, (tSk + 7) / 8 * 8)));
  while (shared_bytes_for(bq, bk, D, Dv, es) > kSharedLimit && (bk > 8 || bq > 8)) {
    if (bk > 8) bk /= 2;
    else bq /= 2;
  }
  if (shared_bytes_for(bq, bk, D, Dv, es) > kSharedLimit)
    unsupported(
        "codegen: attention: head dims D={} Dv={} ({}) need more than 48 KiB of shared memory even for "
        "8x8 tiles",
        D, Dv, dtype_name(q.dtype));
  const int nt = bq * tpr;
  const int64_t nqt = (Sq + bq - 1) / bq;

  AttentionKernel kk;
  kk.bq = bq;
  kk.bk = bk;
  kk.tpr = tpr;
  kk.block = static_cast<unsigned>(nt);
  kk.shared_bytes = shared_bytes_for(bq, bk, D, Dv, es);
  if (dm.generic) {  // x: batch * heads, y: query tiles (attention_dims.h)
    kk.generic_symbols = dm.syms.names();
    kk.grid_axes[0] = GridAxisExpr{dim_mul(B, H), 1, 0, 1};
    kk.grid_axes[1] = GridAxisExpr{Sq, bq, 0, 1};
    kk.grid_axes[2] = GridAxisExpr{1, 1, 0, 1};
    kk.grid = Dv == 0 ? 0 : 1;
  } else {
    kk.grid = B * H * Sq * Dv == 0 ? 0 : static_cast<unsigned>(B * H * nqt);
  }
  // The sizes as text: numbers in a static kernel, b_ / sq_ / sk_ and
  // polynomials of ks in a generic one.
  const std::string SQ = dm.text(Sq), SK = dm.text(Sk);
  const std::string SK_SQ = dm.generic ? "(sk_ - sq_)" : std::to_string(Sk - Sq);
  auto mst = [&](int i) { return dm.text(ms[i]); };
  if (deciding_only()) return kk;  // the launch is decided; the rest is text (codegen/core/deciding_only.h)

  auto ld = [&](const std::string& e) { return fmt::format("({}){}", T, cuda_load(q.dtype, e)); };
  std::string b;
  b += fmt::format("// attention{}: q {} k {} v {}{}{}{}, scale {}; tiles BQ={} BK={}, {} threads per row\n",
                   epi.label.empty() ? "" : " (" + epi.label + ")", q.str(), k.str(), v.str(),
                   has_mask ? " mask " + mask.str() : "", causal ? " causal" : "", nan_to_zero ? " nan_to_zero" : "",
                   scale, bq, bk, tpr);
  if (dm.generic) b += KernelSymbols::struct_text();
  b += epi.helpers;
  // NaN sticks, as the reference's max.
  b += fmt::format(
      "__device__ __forceinline__ {0} @NAME@_max({0} a, {0} v) {{ return (v != v) ? v : (v > a ? v : a); }}\n", T);
  b += fmt::format("extern \"C\" __global__ void @NAME@({}{}) {{\n", epi.params, dm.generic ? ", kiln_syms ks" : "");
  b += fmt::format("  __shared__ {} Qs[{}];\n", T, bq * (D + 1));
  b += fmt::format("  __shared__ {} Ks[{}];\n", T, bk * (D + 1));
  b += fmt::format("  __shared__ {} Vs[{}];\n", T, bk * std::max<int64_t>(Dv, 1));
  b += fmt::format("  __shared__ {} Ss[{}];\n", T, bq * (bk + 1));
  b += fmt::format("  const int r = threadIdx.x / {0}, t = threadIdx.x % {0};\n", tpr);
  if (dm.generic) {
    b += dm.prologue("  ");
    b += fmt::format("  const int bh = blockIdx.x, q0 = blockIdx.y * {};\n", bq);
  } else {
    b += fmt::format("  const int bh = blockIdx.x / {0}, q0 = (blockIdx.x % {0}) * {1};\n", nqt, bq);
  }
  b += fmt::format("  const int h = bh % {}, b = bh / {};\n", H, H);
  b += "  (void)h; (void)b;\n";
  // The key/value rows of this head: its own, or its group's (grouped-query).
  if (G > 1)
    b += fmt::format("  const int kvh = b * {} + h / {};  // grouped-query: {} heads per key/value head\n", Hk, G, G);
  const std::string KVH = G > 1 ? "kvh" : "bh";
  b += fmt::format("  const int nq = min({}, {} - q0);\n", bq, dm.generic ? "(int)" + SQ : SQ);
  // Q tile, staged once (rows padded to D + 1: no bank conflicts between rows).
  b += fmt::format("  const long long qb = ((long long)bh * {} + q0) * {};\n", SQ, D);
  b += fmt::format("  for (int e = threadIdx.x; e < nq * {0}; e += {1}) {{\n", D, nt);
  b += fmt::format("    const int rr = e / {0}, dd = e - rr * {0};\n", std::max<int64_t>(D, 1));
  b += fmt::format("    Qs[rr * {} + dd] = {};\n  }}\n", D + 1, ld(epi.q + "[qb + e]"));
  b += "  const int i = q0 + r;\n  const bool active = r < nq;\n";
  b += fmt::format("  {0} m = -{1}, l = ({0})0;\n", T, INF);
  b += fmt::format("  {} o[{}];\n#pragma unroll\n  for (int c = 0; c < {}; ++c) o[c] = 0;\n", T, oc, oc);
  if (causal)  // keys past the tile's last row's limit are hidden from every row of the tile
    b += fmt::format("  const int kend = max(0, min({}, q0 + nq + {}));\n", dm.generic ? "(int)" + SK : SK,
                     dm.generic ? "(int)" + SK_SQ : SK_SQ);
  else b += fmt::format("  const int kend = {};\n", dm.generic ? "(int)" + SK : SK);
  if (has_mask) b += fmt::format("  const long long mb = (long long)b * {} + (long long)h * {};\n", mst(0), mst(1));
  b += fmt::format("  for (int k0 = 0; k0 < kend; k0 += {}) {{\n", bk);
  b += fmt::format("    const int nk = min({}, kend - k0);\n", bk);
  b += "    __syncthreads();  // the previous tile is consumed (and the Q tile is staged)\n";
  // K / V rows of a cache bound in place are its capacity apart (attention_dims.h).
  if (dm.strided())
    b += fmt::format("    // K / V rows {} / {} positions apart (KV caches' capacities)\n", dim_str(dm.k_rows),
                     dim_str(dm.v_rows));
  b += fmt::format("    const long long kb = ((long long){} * {} + k0) * {};\n", KVH, dm.text(dm.k_rows), D);
  b += fmt::format("    for (int e = threadIdx.x; e < nk * {0}; e += {1}) {{\n", D, nt);
  b += fmt::format("      const int jj = e / {0}, dd = e - jj * {0};\n", std::max<int64_t>(D, 1));
  b += fmt::format("      Ks[jj * {} + dd] = {};\n    }}\n", D + 1, ld(epi.k + "[kb + e]"));
  b += fmt::format("    const long long vb = ((long long){} * {} + k0) * {};\n", KVH, dm.text(dm.v_rows), Dv);
  b += fmt::format("    for (int e = threadIdx.x; e < nk * {}; e += {}) Vs[e] = {};\n", Dv, nt, ld(epi.v + "[vb + e]"));
  b += "    __syncthreads();\n";
  // Scores of this row for keys t, t + TPR, ... (-inf for the rows past Sq,
  // which take part in the shuffles), and their max.
  b += fmt::format("    {} lm = -{};\n", T, INF);
  b += fmt::format("    for (int jj = t; jj < nk; jj += {}) {{\n", tpr);
  b += fmt::format("      {} s = -{};\n", T, INF);
  b += "      if (active) {\n";
  b += "        s = 0;\n";
  b += fmt::format("        for (int dd = 0; dd < {}; ++dd) s += Qs[r * {} + dd] * Ks[jj * {} + dd];\n", D, D + 1,
                   D + 1);
  b += fmt::format("        s = s * {};\n", scale_lit);
  if (has_mask)
    b += fmt::format("        s += {};\n", ld(fmt::format("{}[mb + (long long)i * {} + (long long)(k0 + jj) * {}]",
                                                          epi.mask, mst(2), mst(3))));
  if (causal) b += fmt::format("        if (k0 + jj > i + {}) s = -{};\n", SK_SQ, INF);
  b += "      }\n";
  b += fmt::format("      Ss[r * {} + jj] = s;\n", bk + 1);
  b += "      lm = @NAME@_max(lm, s);\n    }\n";
  // The row's max over its TPR lanes (adjacent, aligned: xor stays in the row).
  b += fmt::format(
      "    for (int off = 1; off < {}; off <<= 1) lm = @NAME@_max(lm, __shfl_xor_sync(0xffffffffu, lm, off));\n", tpr);
  // Online softmax: rescale, then each lane turns its own scores into p.
  b += "    const " + T + " mt = @NAME@_max(m, lm);\n";
  b += fmt::format("    const {0} alpha = mt == -{1} ? ({0})1 : {2}(m - mt);\n", T, INF, EXP);
  b += "    l *= alpha;\n";
  b += fmt::format("#pragma unroll\n    for (int c = 0; c < {}; ++c) o[c] *= alpha;\n", oc);
  b += fmt::format("    for (int jj = t; jj < nk; jj += {}) {{\n", tpr);
  b += fmt::format("      const {0} p = mt == -{1} ? ({0})0 : {2}(Ss[r * {3} + jj] - mt);\n", T, INF, EXP, bk + 1);
  b += fmt::format("      Ss[r * {} + jj] = p;\n      l += p;  // this lane's share of the row sum\n    }}\n", bk + 1);
  b += "    __syncwarp();  // a row's p values come from its own warp\n";
  b += "    m = mt;\n";
  b += "    if (active) {\n";
  b += "      for (int jj = 0; jj < nk; ++jj) {\n";
  b += fmt::format("        const {} p = Ss[r * {} + jj];\n", T, bk + 1);
  b += fmt::format("#pragma unroll\n        for (int c = 0; c < {}; ++c)\n", oc);
  if (Dv % tpr == 0) b += fmt::format("          o[c] += p * Vs[jj * {} + t + {} * c];\n", Dv, tpr);
  else b += fmt::format("          if (t + {1} * c < {2}) o[c] += p * Vs[jj * {0} + t + {1} * c];\n", Dv, tpr, Dv);
  b += "      }\n    }\n  }\n";
  b += fmt::format("  for (int off = 1; off < {}; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);\n", tpr);
  // Store: o / l, or the reference's NaN / 0 for a row without a finite max.
  b += "  if (!active) return;\n";
  if (dm.generic) {  // no keys (sk_ == 0): the reference's product is 0
    b += fmt::format("  const bool bad = sk_ > 0 && !(m - m == ({})0);\n", T);
    b += fmt::format("  const {0} inv = sk_ > 0 ? ({0})1 / l : ({0})0;\n", T);
  } else if (Sk == 0) {
    b += fmt::format("  const bool bad = false;\n  const {} inv = 0;  // no keys: the reference's product is 0\n", T);
  } else {
    b += fmt::format("  const bool bad = !(m - m == ({})0);\n", T);
    b += fmt::format("  const {0} inv = ({0})1 / l;\n", T);
  }
  b += fmt::format("#pragma unroll\n  for (int c = 0; c < {}; ++c) {{\n", oc);
  b += fmt::format("    const int d = t + {} * c;\n", tpr);
  b += fmt::format("    if (d >= {}) break;\n", Dv);
  b += fmt::format("    const {} val = bad ? {} : o[c] * inv;\n", T, nan_to_zero ? "(" + T + ")0" : NaN);
  b += fmt::format("    const long long lin = ((long long)bh * {} + i) * {} + d;\n", SQ, Dv);
  b += epi.code;
  b += "  }\n}\n";
  b += epi.sim_entry;
  kk.source = finish_kernel_source("kiln_attn", epi.label.empty() ? "attention" : epi.label, b, epi.dtypes, kk.name);
  return kk;
}

AttentionKernel emit_attention_op(const AttrMap& attrs, const std::vector<TensorType>& operands, const TensorType& out,
                                  const SymbolBindings& sym_min, const SymbolBindings& sym_max) {
  if (operands.size() < 3 || operands.size() > 4)
    fail("codegen: attention takes 3 or 4 operands, got {}", operands.size());
  const bool has_mask = operands.size() == 4;
  AttentionEpilogue epi;
  std::vector<KernelParam> params = {{out.dtype, true, "out"},
                                     {operands[0].dtype, false, "q"},
                                     {operands[1].dtype, false, "k"},
                                     {operands[2].dtype, false, "v"}};
  if (has_mask) params.push_back({operands[3].dtype, false, "mask"});
  // Symbolic operands: a shape-generic kernel, its entries passing kiln_syms.
  bool generic = false;
  for (const TensorType& t : operands) generic = generic || has_symbolic_dims(t.shape);
  epi.sym_min = sym_min;
  epi.sym_max = sym_max;
  epi.params = kernel_param_list(params);
  epi.sim_entry = kernel_sim_entry(params, generic);
  for (const KernelParam& p : params) epi.dtypes.push_back(p.dtype);
  epi.buffer_count = static_cast<int>(params.size());
  for (int i = 1; i < epi.buffer_count; ++i) epi.operand_buffers.push_back(i);
  std::vector<KernelParam> split_params = params;
  split_params.push_back({DType::F32, true, "ws"});
  split_params.push_back({DType::U32, true, "tickets"});
  epi.sim_entry_split = kernel_sim_entry(split_params, generic);
  epi.q = params[1].name;
  epi.k = params[2].name;
  epi.v = params[3].name;
  if (has_mask) epi.mask = params[4].name;
  if (out.dtype != operands[0].dtype) fail("codegen: attention: output {} but q {}", out.str(), operands[0].str());
  epi.code = fmt::format("    out[lin] = {};\n", cuda_store(out.dtype, out.dtype == DType::F64 ? "val" : "(float)val"));
  return emit_attention(operands[0], operands[1], operands[2], has_mask, has_mask ? operands[3] : TensorType(), attrs,
                        epi);
}

namespace {

const Node* attention_in_body(const Node& n) {
  if (n.op() != "fused" || !n.body() || n.attrs().get_string("kind", "") != "attention") return nullptr;
  const Node* found = nullptr;
  for (const auto& bn : n.body()->nodes())
    if (bn->op() == "attention") {
      if (found) return nullptr;
      found = bn.get();
    }
  return found;
}

// The fused node's kernel, or kiln::Unsupported naming what does not fit.
FusedAttentionKernel build_fused(const Node& n) {
  if (!attention_in_body(n)) unsupported("codegen: {} is not a fused node with one attention op", n.describe());
  Epilogue e = Epilogue::from_fused(n, op_registry(), {"attention"});
  const Node& a = e.anchor();
  AttentionEpilogue epi;
  // Over symbolic sizes (a plan with shape profiles) the kernel is
  // shape-generic and its epilogue reads its sizes from the same `ks`: the
  // slots of the attention's kiln_syms (its q, k, v and mask's symbols) must
  // be the epilogue's, so an epilogue reading a symbol the attention does not
  // (an operand of another extent) is refused.
  const bool generic = !e.symbols().empty();
  // Keys or values read through a KV cache's capacity (k_capacity /
  // v_capacity, attention_dims.h) take one more kiln_syms slot per cache
  // than the epilogue's symbols in a shape-generic kernel: the epilogue reads
  // its sizes from the attention's slots, so a cache bound in place keeps
  // the fused head merge. (A static kernel, the graph specialised to one
  // shape, reads dense rows and ignores the capacity, as the bare op does.)
  const std::string kcap = a.attrs().get_string("k_capacity", ""), vcap = a.attrs().get_string("v_capacity", "");
  if (generic) {
    std::vector<Shape> anchor_shapes;
    for (int i = 0; i < 4 && i < a.num_inputs(); ++i)
      if (a.input(i)) anchor_shapes.push_back(a.input(i)->shape());
    if (KernelSymbols(anchor_shapes).names() != e.symbols().names())
      unsupported("codegen: fused attention {}: its epilogue reads symbols ({}) beyond the attention's ({})",
                  n.describe(), fmt::join(e.symbols().names(), ", "),
                  fmt::join(KernelSymbols(anchor_shapes).names(), ", "));
    symbol_ranges_of(n, epi.sym_min, epi.sym_max);
    Shape capacities;  // the slots of AttentionDims::of (names sorted): the operands' symbols and these
    for (const std::string* c : {&kcap, &vcap})
      if (!c->empty()) capacities.push_back(symbol_dim(*c));
    if (!capacities.empty()) {
      anchor_shapes.push_back(capacities);
      e.read_symbols_of(KernelSymbols(anchor_shapes));
    }
  }
  epi.params = e.params();
  epi.sim_entry = e.sim_entry("@NAME@", false, false, generic);
  epi.sim_entry_split = e.sim_entry("@NAME@", true, true, generic);
  epi.buffer_count = static_cast<int>(e.results().size() + e.slots().size());
  for (const TensorType& t : e.results()) epi.dtypes.push_back(t.dtype);
  for (const TensorType& t : e.slots()) epi.dtypes.push_back(t.dtype);
  epi.dtypes.push_back(a.output(0)->dtype());
  auto operand = [&](int i) -> std::string {
    if (i >= a.num_inputs() || !a.input(i)) return "";
    const int slot = e.anchor_slot(i);
    if (slot < 0)
      unsupported(
          "codegen: fused attention {}: operand {} of the attention is computed inside the body "
          "(prologue ops are not supported)",
          n.describe(), i);
    return fmt::format("in{}", slot);
  };
  epi.q = operand(0);
  epi.k = operand(1);
  epi.v = operand(2);
  epi.mask = operand(3);
  for (int i = 0; i < 4 && i < a.num_inputs(); ++i)
    if (a.input(i)) epi.operand_buffers.push_back(static_cast<int>(e.results().size()) + e.anchor_slot(i));
  epi.label = "fused_attention";
  epi.helpers = std::string(expr_prelude());
  epi.code = e.code("val", e.wide() ? "lin" : "(int)lin", "    ");
  const bool has_mask = a.num_inputs() > 3 && a.input(3);
  FusedAttentionKernel fk;
  fk.kernel = emit_attention(a.input(0)->type(), a.input(1)->type(), a.input(2)->type(), has_mask,
                             has_mask ? a.input(3)->type() : TensorType(), a.attrs(), epi);
  fk.constants = e.constants();
  return fk;
}

}  // namespace

bool is_attention_fused(const Node& n) {
  if (!attention_in_body(n)) return false;
  try {
    build_fused(n);
    return true;
  } catch (const Error&) {
    return false;
  }
}

FusedAttentionKernel emit_fused_attention(const Node& n) { return build_fused(n); }

bool attention_shape_generic(const Node& n) { return attention_shape_generic(n, n); }

bool attention_shape_generic(const Node& n, const Node& ranges_from) {
  if (n.body() || n.op() != "attention" || n.num_inputs() < 3) return false;
  for (const Value* v : n.inputs())
    if (!v) return false;
  const Shape &q = n.input(0)->shape(), &k = n.input(1)->shape(), &v = n.input(2)->shape();
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) return false;
  for (int64_t d : {q[1], k[1], q[3], v[3]})
    if (is_symbolic_dim(d)) return false;
  try {  // the rest of AttentionDims::of's conditions (ranges, growing dims)
    SymbolBindings lo, hi;
    symbol_ranges_of(ranges_from, lo, hi);
    AttentionDims::of(n.input(0)->type(), n.input(1)->type(), n.input(2)->type(),
                      n.num_inputs() > 3 ? n.input(3)->shape() : Shape{}, lo, hi,
                      n.attrs().get_string("k_capacity", ""), n.attrs().get_string("v_capacity", ""));
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace kiln::codegen
