#include "codegen/emitters/attention/emit_attention_tc.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/emitters/gemm_conv/emit_gemm_tc.h"
#include "codegen/emitters/attention/attention_tc_text.h"
#include "codegen/emitters/gemm_conv/gemm_tile_cost.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

// Launch heuristic constants (docs/codegen.md).
constexpr int kTargetBlocks = 132;          // SMs of an H100: below this many blocks, fewer warps per block
constexpr size_t kSharedLimit = 48 * 1024;  // static shared memory without the opt-in attribute

// Shared memory (bytes) of the two pipeline stages, stage 1 also holding the
// Q tile before the first K/V tile is loaded there.
size_t tc_shared_bytes(int bq, int bk, int64_t d, int64_t dv) {
  const int64_t stage = bk * ((d + 8) + (dv + 8));
  return static_cast<size_t>(2 * (stage + std::max<int64_t>(stage, bq * (d + 8))));
}

// Replaces every @KEY@ of `text` by vars[KEY] (a key missing is a bug here).
std::string substitute(std::string_view text, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t at = text.find('@', pos);
    if (at == std::string_view::npos) return out.append(text.substr(pos));
    const size_t end = text.find('@', at + 1);
    KILN_CHECK(end != std::string_view::npos, "codegen: unterminated @KEY@ in the attention template");
    auto it = vars.find(std::string(text.substr(at + 1, end - at - 1)));
    KILN_CHECK(it != vars.end(), "codegen: unknown key {} in the attention template", text.substr(at, end - at + 1));
    out.append(text.substr(pos, at - pos));
    out += it->second;
    pos = end + 1;
  }
}

// The most blocks the keys of one query tile are split among.
constexpr int kMaxKvSplits = 64;
// Registers ptxas gives this kernel (160-200 a thread; codegen_attention_test
// prints them): 2 warps per sub-partition, 8 per SM.
constexpr int kAttentionRegisters = 200;

// The estimated time (us) of the kernel with the keys of each of `tiles`
// query tiles split in `splits` parts of `per_split` key tiles, by kiln's
// performance model itself (perf/perf_model.h, on the GPU the GEMM tiles are
// chosen for, gemm_tile_cost.h), the launch described as perf/plan_work.cpp
// reads it from the kernel: its k-loop of `per_split` key tiles through two
// stages, the L2 bytes every block streams (its Q tile and its K/V tiles:
// query heads sharing a key/value head each read it, unless packed into one
// block), the DRAM bytes, and a split's combine as the folded tail (the last
// block of each query tile reads the partial states and writes the result).
// `bytes`: q, k, v, mask and the result; `out_bytes`: the result;
// `state_bytes`: the workspace one split writes.
double split_cost_us(int64_t tiles, int64_t splits, int64_t per_split, int warps, int bq, int bk, int64_t d, int64_t dv,
                     size_t smem, double bytes, double out_bytes, double state_bytes) {
  const int64_t dims = d + dv;
  perf::LaunchWork w;
  w.kind = perf::WorkKind::Attention;
  w.math = perf::Math::F16Tensor;
  w.blocks = tiles * splits;
  w.threads = 32 * warps;
  w.registers = kAttentionRegisters;
  w.smem_bytes = static_cast<int>(smem);
  w.tile.bm = bq;
  w.tile.bn = static_cast<int>(dv);
  w.tile.bk = bk;
  w.tile.stages = 2;
  w.tile.k_tiles = per_split;
  w.tile.split = static_cast<int>(splits);
  w.block_flops = 2.0 * bq * double(per_split) * bk * double(dims);
  w.flops = double(w.blocks) * w.block_flops;
  const double ws = splits > 1 ? double(splits) * state_bytes : 0;
  w.bytes = bytes + ws;
  w.l2_bytes = double(w.blocks) * 2.0 * (double(per_split) * bk * double(dims) + double(bq) * double(d));
  if (splits > 1) {
    w.tail_blocks = tiles;
    w.tail_bytes = ws + out_bytes;
  }
  return perf::estimate_launch(w, tile_choice_gpu()).est_us;
}

// The template's edits for a shape-generic kernel (emit_attention_tc.h):
// kiln_syms after the buffers; SQ, SK and the query tile count read from it
// instead of constants; no keys-past-SK test can be folded away.
void make_generic(std::string& tmpl, const AttentionDims& dm) {
  auto edit = [&](std::string_view from, const std::string& to) {
    const size_t at = tmpl.find(from);
    KILN_CHECK(at != std::string::npos, "codegen: attention template lacks '{}'", from);
    tmpl.replace(at, from.size(), to);
  };
  edit(") {\n  constexpr int BQ", ", kiln_syms ks) {\n  constexpr int BQ");
  edit(" SQ = @SQ@, SK = @SK@,", "");
  edit("  constexpr int NQT = (SQ + BQ - 1) / BQ;\n",
       dm.prologue("  ") + "  const int SQ = (int)sq_, SK = (int)sk_;\n  const int NQT = (SQ + BQ - 1) / BQ;\n");
}

// A cache bound in place (attention_dims.h): K / V rows `capacity`
// positions apart, the capacity symbols' values read from kiln_syms.
void make_strided(std::string& tmpl, const AttentionDims& dm) {
  auto edit = [&](std::string_view from, const std::string& to) {
    const size_t at = tmpl.find(from);
    KILN_CHECK(at != std::string::npos, "codegen: attention template lacks '{}'", from);
    tmpl.replace(at, from.size(), to);
  };
  edit("  const int NQT = (SQ + BQ - 1) / BQ;\n",
       fmt::format(
           "  const int NQT = (SQ + BQ - 1) / BQ;\n  // K / V rows {} / {} positions apart (KV caches' capacities)\n"
           "  const long long KROWS = {}, VROWS = {};\n",
           dim_str(dm.k_rows), dim_str(dm.v_rows), dm.text(dm.k_rows), dm.text(dm.v_rows)));
  edit(" * SK * D;", " * KROWS * D;");
  edit(" * SK * DV;", " * VROWS * DV;");
}

// The template's edits for P packed grouped-query heads (emit_attention_tc's
// tiling): SQ counts a packed head's rows, P * SQH, of SQH queries each.
void make_packed(std::string& tmpl, bool generic, int64_t sq, int64_t p, int64_t hp) {
  auto edit = [&](std::string_view from, const std::string& to) {
    const size_t at = tmpl.find(from);
    KILN_CHECK(at != std::string::npos, "codegen: attention template lacks '{}'", from);
    tmpl.replace(at, from.size(), to);
  };
  const std::string note = fmt::format(
      "  // grouped-query packing: row r is query r % SQH of head {} * (bh % {}) + r / SQH of batch bh / {}\n", p, hp,
      hp);
  if (generic)
    edit("  const int SQ = (int)sq_, SK = (int)sk_;\n",
         note + fmt::format("  const int SQH = (int)sq_, SQ = {} * SQH, SK = (int)sk_;\n  (void)SQH;\n", p));
  else
    edit("  constexpr int NQT = (SQ + BQ - 1) / BQ;\n",
         note + fmt::format("  constexpr int SQH = {}, NQT = (SQ + BQ - 1) / BQ;\n  (void)SQH;\n", sq));
}

// The kernel's end: one block (o / l into the epilogue) or a split's
// partial state and the combine; with key-split warps (kw > 1), their
// states combined in the block first.
std::string finish_text(bool split, int kw) {
  namespace text = attention_tc_text;
  if (kw == 1) return std::string(split ? text::kSplitFinish : text::kFinish);
  std::string f(text::kWarpsCombine);
  const std::string_view end = split ? text::kWarpsEndSplit : text::kWarpsEndOne;
  f.replace(f.find("@WARPS_END@"), std::string_view("@WARPS_END@").size(), end);
  if (!split) return f + "}\n";
  const size_t ticket = text::kSplitFinish.find(text::kSplitTicketStart);
  KILN_CHECK(ticket != std::string_view::npos, "codegen: the split-KV end lacks its ticket");
  return f + std::string(text::kSplitFinish.substr(ticket));
}

// The template's edits for key-split warps (kw > 1): each stage holds BKB =
// KW * BK keys, warp w multiplies keys w*BK .. w*BK + BK - 1 of it, and every
// warp holds the block's 16 query rows.
void make_key_split(std::string& tmpl) {
  auto edit = [&](std::string_view from, std::string_view to) {
    const size_t at = tmpl.find(from);
    KILN_CHECK(at != std::string::npos, "codegen: attention template lacks '{}'", from);
    tmpl.replace(at, from.size(), to);
  };
  edit("  constexpr int STAGE = BK * (LDK + LDV);   // a K tile [BK][LDK], then a V tile [BK][LDV]",
       "  constexpr int KW = @KW@, BKB = KW * BK;  // KW warps split each key tile of BKB keys, BK each\n"
       "  constexpr int STAGE = BKB * (LDK + LDV);  // a K tile [BKB][LDK], then a V tile [BKB][LDV]");
  edit("const int ntiles = (kend + BK - 1) / BK;", "const int ntiles = (kend + BKB - 1) / BKB;");
  edit("@T@* vs = ks + BK * LDK;\n    for (int c = tid; c < BK * (D / 8);",
       "@T@* vs = ks + BKB * LDK;\n    for (int c = tid; c < BKB * (D / 8);");
  edit("for (int c = tid; c < BK * (DV / 8);", "for (int c = tid; c < BKB * (DV / 8);");
  edit("smem + STAGE + (warp * 16 + lane % 16) * LDK", "smem + STAGE + (lane % 16) * LDK");
  edit("const int row0 = q0 + warp * 16 + g;", "const int row0 = q0 + g;  // every warp: the block's rows");
  edit("const int k0 = it * BK;", "const int k0 = it * BKB;");
  edit("k0 + BK);", "k0 + BKB);");
  edit("    const @T@* ks = smem + @THIS_STAGE@ * STAGE;\n    const @T@* vs = ks + BK * LDK;",
       "    const @T@* ks = smem + @THIS_STAGE@ * STAGE + warp * BK * LDK;  // this warp's keys\n"
       "    const @T@* vs = smem + @THIS_STAGE@ * STAGE + BKB * LDK + warp * BK * LDV;");
  edit("col = k0 + (a * SC + n) * 8", "col = k0 + warp * BK + (a * SC + n) * 8");
}

}  // namespace

bool attention_tc_applies(const TensorType& q, const TensorType& k, const TensorType& v) {
  if (q.dtype != DType::F16 && q.dtype != DType::BF16) return false;
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4) return false;
  const int64_t D = q.shape[3], Dv = v.shape[3];
  auto head_ok = [](int64_t d) { return d % 16 == 0 && d >= 16 && d <= 128; };
  if (has_symbolic_dims(q.shape) || has_symbolic_dims(k.shape))  // emit_attention checks the keys' smallest count
    return head_ok(D) && head_ok(Dv);
  return head_ok(D) && head_ok(Dv) && k.shape[2] > 0 && q.shape[0] * q.shape[1] * q.shape[2] > 0;
}

AttentionKernel emit_attention_tc(const TensorType& q, const TensorType& k, const TensorType& v,
                                  const AttentionDims& dm, bool has_mask, const std::vector<int64_t>& ms,
                                  const AttrMap& attrs, const AttentionEpilogue& epi) {
  KILN_CHECK(attention_tc_applies(q, k, v), "codegen: attention: tensor-core kernel for q {} k {} v {}", q.str(),
             k.str(), v.str());
  const bool generic = dm.generic;
  // A shape-generic kernel decides its tiles at the largest shapes and its
  // split at the decode corner (emit_attention_tc.h); B, Sq, Sk below are
  // then those sizes, the kernel text reads each launch's.
  const int64_t H = q.shape[1], D = q.shape[3], Dv = v.shape[3];
  const int64_t Hk = k.shape[1], G = H / Hk;  // grouped-query: G query heads per key/value head
  const int64_t B = dm.max(dm.B), Sq = dm.max(dm.Sq), Sk = dm.max(dm.Sk);
  const bool bf16 = q.dtype == DType::BF16;
  const float scale = attrs.get_float("scale", 1.0f);
  const bool causal = attrs.get_int("causal", 0) != 0;
  const bool nan_to_zero = attrs.get_int("nan_to_zero", 0) != 0;

  // Grouped-query head packing (issue 18): the G query heads of a key/value
  // head read the same K and V, and the query rows of P consecutive heads lie
  // back to back in q ([B, H, Sq, D] is [B, H / P, P * Sq, D]), as their
  // output rows do. So the kernel runs over H / P heads of P * Sq rows each,
  // head bh reading key/value head bh / (G / P): a decode step's P queries
  // share one warp's 16 rows, and each K/V tile is loaded once for P query
  // heads instead of once per head. A row's own head (row / SQH) and query
  // (row % SQH) pick its mask element and causal limit. P is a divisor of G,
  // chosen with the split below by the cost terms (packing fewer heads keeps
  // more tiles for the split's combine); P = 1: the plain kernel. Only where
  // a head's queries leave a warp's rows idle (fewer than 16 at the decode
  // corner) is P > 1 tried.
  const int64_t sq_corner = generic ? dm.min(dm.Sq) : Sq;
  int bk = 16;
  while (bk < 64 && bk < Sk) bk *= 2;

  // One candidate launch: P heads packed, its tiles and its split.
  struct Plan {
    int64_t P = 1, rows = 0, nqt = 0, tiles = 0, splits = 1, per_split = 0;
    int warps = 1, bq = 16, bk = 16, kw = 1, block_warps = 1;
    size_t smem = 0;
    double cost = 0;
  };
  auto plan_for = [&](int64_t P) {
    Plan pl;
    pl.P = P;
    pl.rows = P * Sq;
    const int64_t heads = H / P;
    // Tiling (docs/codegen.md): 4 warps (64 queries) per block, halved while
    // the grid would not fill an H100 or a warp would have no rows; BK = 64
    // keys (fewer for short sequences), halved until the two stages fit.
    int warps = 4;
    auto blocks = [&](int w) { return B * heads * ((pl.rows + 16 * w - 1) / (16 * w)); };
    while (warps > 1 && (blocks(warps) < kTargetBlocks || 16 * (warps / 2) >= pl.rows)) warps /= 2;
    pl.warps = warps;
    pl.bq = 16 * warps;
    pl.bk = bk;
    while (pl.bk > 16 && tc_shared_bytes(pl.bq, pl.bk, D, Dv) > kSharedLimit) pl.bk /= 2;
    if (tc_shared_bytes(pl.bq, pl.bk, D, Dv) > kSharedLimit)  // not reached for D, Dv <= 128
      unsupported("codegen: attention: D={} Dv={} need more than 48 KiB of shared memory", D, Dv);
    pl.nqt = (pl.rows + pl.bq - 1) / pl.bq;
    // Several warps per block where one would be alone (issue 18): a block of
    // one warp (few queries: a decode step, or too few query tiles to fill the
    // GPU) splits each key tile of BK keys among KW = BK / 16 warps of 16 keys,
    // in the same shared memory, all holding the block's 16 rows; their
    // states are combined in the block at the end (kWarpsCombine).
    pl.kw = warps == 1 ? pl.bk / 16 : 1;
    pl.block_warps = warps * pl.kw;
    pl.smem = tc_shared_bytes(pl.bq, pl.bk, D, Dv);
    // Split-KV (flash-decoding): where few query tiles face many key tiles (a
    // decode step: one query against a long past), the keys of each tile are
    // divided among blocks if the cost terms above put that faster -- the
    // smallest such split on a tie. Each split keeps at least one key tile.
    // Generic: the decode corner, the fewest query tiles against the most keys.
    const int64_t key_tiles = (Sk + pl.bk - 1) / pl.bk;
    pl.tiles = generic ? dm.min(dm.B) * heads * ((P * dm.min(dm.Sq) + pl.bq - 1) / pl.bq) : B * heads * pl.nqt;
    // The bytes at the shapes the split is decided at (generic: the decode
    // corner, fewest queries and batch against the most keys).
    const int64_t Bc = generic ? dm.min(dm.B) : B, Sqc = sq_corner;
    const double io_bytes =
        (G == 1 ? 2.0 * double(Bc * H) * (double(Sqc) * double(D + Dv) + double(Sk) * double(D + Dv))
                : 2.0 * double(Bc) * double(H * Sqc + Hk * Sk) * double(D + Dv)) +
        (has_mask ? 2.0 * double(Bc * H) * double(Sqc) * double(Sk) : 0.0);
    const double out_bytes = 2.0 * double(Bc * H * Sqc) * double(Dv);
    const double state_bytes = 4.0 * double(Bc * H * Sqc) * double(Dv + 2);
    auto cost = [&](int64_t s, int64_t per) {
      return split_cost_us(pl.tiles, s, per, pl.block_warps, pl.bq, pl.bk, D, Dv, pl.smem, io_bytes, out_bytes,
                           state_bytes);
    };
    pl.per_split = key_tiles;
    pl.cost = cost(1, key_tiles);
    for (int64_t s = 2; s <= std::min<int64_t>(kMaxKvSplits, key_tiles); ++s) {
      const int64_t per = (key_tiles + s - 1) / s;
      if ((key_tiles + per - 1) / per != s) continue;  // the same split as a smaller s
      const double c = cost(s, per);
      if (c < pl.cost) pl.cost = c, pl.splits = s, pl.per_split = per;
    }
    if (B * heads * pl.nqt * pl.splits > INT32_MAX) pl.splits = 1, pl.per_split = key_tiles;
    return pl;
  };
  Plan pl = plan_for(1);
  if (G > 1 && sq_corner < 16)
    for (int64_t P = 2; P <= G; ++P) {  // the cheapest packing; on a tie, the most heads (fewer K/V reads)
      if (G % P != 0) continue;
      const Plan c = plan_for(P);
      if (c.cost <= pl.cost) pl = c;
    }
  const int64_t P = pl.P, rows = pl.rows, HP = H / P, GP = G / P;  // heads packed, their rows; grid heads; per K/V head
  const int bq = pl.bq, kw = pl.kw, block_warps = pl.block_warps;
  bk = pl.bk;
  const int64_t nqt = pl.nqt, tiles = pl.tiles, splits = pl.splits, per_split = pl.per_split;
  const size_t smem_bytes = pl.smem;
  // The warps' states ([KW][16][2 + Dv] floats) reuse the stages' memory.
  KILN_CHECK(kw == 1 || size_t(kw) * 16 * size_t(Dv + 2) * 4 <= smem_bytes,
             "codegen: attention: the key-split warps' states exceed the shared memory");
  const bool split = splits > 1;

  AttentionKernel kk;
  kk.bq = bq;
  kk.bk = bk;
  kk.tpr = 0;
  kk.warps = block_warps;
  kk.tensor_cores = true;
  kk.block = static_cast<unsigned>(32 * block_warps);
  kk.grid = static_cast<unsigned>(tiles * splits);
  kk.shared_bytes = smem_bytes;
  kk.kv_splits = static_cast<int>(splits);
  if (split) {  // at the largest shapes for a generic kernel
    kk.workspace_f32 = splits * B * H * Sq * (Dv + 2);
    kk.tile_counters = B * HP * nqt;
  }
  if (generic) {  // x: batch * heads, y: query tiles, z: this launch's key splits
    kk.generic_symbols = dm.syms.names();
    kk.grid_axes[0] = GridAxisExpr{dim_mul(dm.B, HP), 1, 0, 1};
    kk.grid_axes[1] = GridAxisExpr{P > 1 ? dim_mul(dm.Sq, P) : dm.Sq, bq, 0, 1};
    kk.grid_axes[2] = split ? GridAxisExpr{dm.Sk, per_split * bk, 0, 1} : GridAxisExpr{1, 1, 0, 1};
    kk.grid = 1;
  }
  if (deciding_only()) return kk;  // the launch is decided; the rest is text (codegen/core/deciding_only.h)

  const std::string INF = "__uint_as_float(0x7f800000u)";
  std::string mask_base, mask_add;
  if (has_mask && P == 1) {
    mask_base = fmt::format("  const long long mb = (long long)(bh / {}) * {} + (long long)(bh % {}) * {};\n", H,
                            dm.text(ms[0]), H, dm.text(ms[1]));
    mask_add = fmt::format("          if (row < SQ && col < SK) x += {};\n",
                           cuda_load(q.dtype, fmt::format("{}[mb + (long long)row * {} + (long long)col * {}]",
                                                          epi.mask, dm.text(ms[2]), dm.text(ms[3]))));
  } else if (has_mask) {  // packed heads: bh is (batch, first head / P); the row names its query head
    mask_base = fmt::format("  const long long mb = (long long)(bh / {}) * {} + (long long)(bh % {} * {}) * {};\n", HP,
                            dm.text(ms[0]), HP, P, dm.text(ms[1]));
    mask_add = fmt::format(
        "          if (row < SQ && col < SK) x += {};\n",
        cuda_load(q.dtype, fmt::format("{}[mb + (long long)(row / SQH) * {} + (long long)(row % SQH) * {} + "
                                       "(long long)col * {}]",
                                       epi.mask, dm.text(ms[1]), dm.text(ms[2]), dm.text(ms[3]))));
  }
  // Causal with packed heads: a row's query is row % SQH; a block's rows
  // see the keys up to its latest query's (every query's, when its rows
  // span two heads).
  const std::string kend =
      !causal  ? "SK"
      : P == 1 ? "max(0, min(SK, q0 + nq + (SK - SQ)))"
               : "max(0, min(SK, (q0 / SQH == (q0 + nq - 1) / SQH ? (q0 + nq - 1) % SQH + 1 : SQH) + (SK - SQH)))";
  const int n_s = bk / 8, n_o = static_cast<int>(Dv / 8);
  std::map<std::string, std::string> vars = {
      {"NAME", "@NAME@"},
      {"EPILOGUE_CODE", "@EPILOGUE_CODE@"},
      {"T", std::string(cuda_storage_type(q.dtype))},
      {"AS_USHORT", bf16 ? "__bfloat16_as_ushort" : "__half_as_ushort"},
      {"CVT", bf16 ? "__float2bfloat16_rn" : "__float2half_rn"},
      {"PTX_T", bf16 ? "bf16" : "f16"},
      {"MMA", bf16 ? "kiln_mma_tile_bf16" : "kiln_mma_tile_f16"},
      {"THREADS", std::to_string(32 * block_warps)},
      {"KW", std::to_string(kw)},
      {"PARAMS", epi.params},
      {"BQ", std::to_string(bq)},
      {"BK", std::to_string(bk / kw)},  // per warp
      {"D", std::to_string(D)},
      {"DV", std::to_string(Dv)},
      {"SQ", std::to_string(rows)},
      {"SK", std::to_string(Sk)},
      {"SC", std::to_string(std::min(4, n_s / kw))},
      {"OC", std::to_string(n_o % 4 == 0 ? 4 : 2)},
      {"SMEM", std::to_string(kk.shared_bytes / 2)},
      {"KEND", kend},
      {"MASK_BASE", mask_base},
      {"QP", epi.q},
      {"KP", epi.k},
      {"VP", epi.v},
      {"INF", INF},
      {"SCALE", fmt::format("__uint_as_float({:#x}u)", std::bit_cast<uint32_t>(scale))},
      {"MASK_ADD", mask_add},
      {"CAUSAL_TEST", !causal  ? ""
                      : P == 1 ? " || col > row + (SK - SQ)"
                               : " || col > row % SQH + (SK - SQH)"},
      {"BAD_VALUE", nan_to_zero ? "0.0f" : "__uint_as_float(0x7fc00000u)"},
      {"SPLIT_HEAD",
       split && generic
           ? fmt::format(
                 "  const int KV_SPLITS = gridDim.z;  // split-KV: this launch's parts of {} key tiles\n"
                 "  constexpr int KV_TILES = {}, RS = DV + 2;\n"
                 "  const long long ROWS = b_ * {} * SQ;\n"
                 "  const int tile_ = blockIdx.x * NQT + blockIdx.y, ks_ = blockIdx.z;  // the tile, its split\n",
                 per_split, per_split, HP)
       : split ? fmt::format("  constexpr int KV_SPLITS = {}, KV_TILES = {}, ROWS = {}, RS = DV + 2;  // split-KV\n"
                             "  const int tile_ = blockIdx.x % {}, ks_ = blockIdx.x / {};  // the tile, its split\n",
                             splits, per_split, B * H * Sq, tiles, tiles)
               : ""},
      {"BLK", split     ? "tile_"
              : generic ? "(blockIdx.x * NQT + blockIdx.y)"
                        : "blockIdx.x"},
      {"SPLIT_RANGE",
       split ? "  const int it0_ = ks_ * KV_TILES, it1_ = min(ntiles, it0_ + KV_TILES);  // this split's key tiles\n"
             : ""},
      {"FIRST_LOAD",
       split ? (kw > 1 ? "if (it1_ > it0_) load_kv(0, it0_ * BKB);" : "if (it1_ > it0_) load_kv(0, it0_ * BK);")
             : "if (ntiles > 0) load_kv(0, 0);"},
      {"IT0", split ? "it0_" : "0"},
      {"IT1", split ? "it1_" : "ntiles"},
      {"NEXT_STAGE", split ? "(it + 1 - it0_) & 1" : "(it + 1) & 1"},
      {"THIS_STAGE", split ? "((it - it0_) & 1)" : "(it & 1)"},
      {"LDCG", "@NAME@_ldcg"},
  };
  std::string b = fmt::format(
      "// attention{} on tensor cores: q {} k {} v {}{}{}{}, scale {}; {} warps{}, BQ={} BK={}, {} bytes of shared "
      "memory{}{}\n",
      epi.label.empty() ? "" : " (" + epi.label + ")", q.str(), k.str(), v.str(), has_mask ? " mask" : "",
      causal ? " causal" : "", nan_to_zero ? " nan_to_zero" : "", scale, block_warps,
      kw > 1 ? " on the block's 16 rows, each with 16 keys of every key tile" : "", bq, bk, kk.shared_bytes,
      G == 1   ? ""
      : P == 1 ? fmt::format("; grouped-query: {} heads per key/value head", G)
               : fmt::format("; grouped-query: {} of the {} heads of a key/value head packed into a head's rows", P, G),
      split ? fmt::format("; split-KV: the keys in {} parts of {} tiles, combined by the last block of each tile",
                          splits, per_split)
            : "");
  if (split) {
    // What the model counts (perf/plan_work.cpp): the k-loop reads q, k, v,
    // the mask and writes the workspace; the combine reads the workspace and
    // the epilogue's operands and writes the results.
    std::string loop = "// buffers:", tail = "// tail buffers:";
    for (int i = 0; i < epi.buffer_count; ++i) {
      const bool operand =
          std::find(epi.operand_buffers.begin(), epi.operand_buffers.end(), i) != epi.operand_buffers.end();
      (operand ? loop : tail) += fmt::format(" {}", i);
    }
    b += fmt::format("{} {}\n{} {}\n", loop, epi.buffer_count, tail, epi.buffer_count);
    // The partial states were written by other SMs during this launch, and L1
    // is not coherent between SMs: read them from L2.
    b += "#ifndef KILN_SIM\n#define @NAME@_ldcg(p) __ldcg(p)\n#else\n#define @NAME@_ldcg(p) (*(p))\n#endif\n";
  }
  b += std::string(mma_prelude());
  b += epi.helpers;
  if (generic) b += KernelSymbols::struct_text();
  std::string tmpl(attention_tc_text::kKernel);
  const size_t fin = tmpl.find("@FINISH@");
  tmpl.replace(fin, std::string_view("@FINISH@").size(), finish_text(split, kw));
  if (split) {
    const std::string params = "@PARAMS@) {";
    const size_t pp = tmpl.find(params);
    tmpl.replace(pp, params.size(), "@PARAMS@, KILN_PTR(float) ws, KILN_PTR(unsigned) tickets) {");
  }
  if (kw > 1) make_key_split(tmpl);
  if (GP > 1) {  // grouped-query: the head's key/value rows are its group's
    const std::string from =
        "  const auto kg = @KP@ + (long long)bh * SK * D;\n  const auto vg = @VP@ + (long long)bh * SK * DV;";
    const size_t at = tmpl.find(from);
    KILN_CHECK(at != std::string::npos, "codegen: attention template lacks its K/V bases");
    tmpl.replace(at, from.size(),
                 fmt::format("  const int kvh_ = bh / {0};  // grouped-query: {0} of these heads per key/value head\n"
                             "  const auto kg = @KP@ + (long long)kvh_ * SK * D;\n"
                             "  const auto vg = @VP@ + (long long)kvh_ * SK * DV;",
                             GP));
  }
  if (generic) make_generic(tmpl, dm);
  if (P > 1) make_packed(tmpl, generic, Sq, P, HP);
  if (generic && dm.strided()) make_strided(tmpl, dm);
  std::string body = substitute(tmpl, vars);
  const size_t at = body.find("@EPILOGUE_CODE@");
  body.replace(at, std::string_view("@EPILOGUE_CODE@").size(), epi.code);
  b += body;
  b += split ? epi.sim_entry_split : epi.sim_entry;
  kk.source = finish_kernel_source("kiln_attn_tc", epi.label.empty() ? "attention" : epi.label, b, epi.dtypes, kk.name);
  return kk;
}

}  // namespace kiln::codegen
