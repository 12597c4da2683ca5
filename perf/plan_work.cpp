#include "perf/plan_work.h"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "ir/error.h"
#include "runtime/cubin_info.h"

namespace kiln::perf {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The first integer captured by `re` in `s`, or -1.
int64_t find_int(const std::string& s, const std::regex& re) {
  std::smatch m;
  return std::regex_search(s, m, re) ? std::stoll(m[1].str()) : -1;
}

bool is_anchor_op(const std::string& op) {
  return op == "conv" || op == "conv_transpose" || op == "matmul" || op == "gemm" || op == "attention" ||
         op == "einsum";
}

// The compute op a kernel is built around: the node itself, or the anchor
// in a fused node's body; nullptr for pointwise/reduction/data-movement.
const Node* anchor_of(const Node& n) {
  if (is_anchor_op(n.op())) return &n;
  if (n.body())
    for (const auto& b : n.body()->nodes())
      if (const Node* a = anchor_of(*b)) return a;
  return nullptr;
}

double numel(const Value* v) { return v ? double(shape_numel(v->shape())) : 0.0; }

struct AnchorWork {
  WorkKind kind = WorkKind::Other;
  double flops = 0;
  int64_t k = 0;          // the GEMM reduction length per output (attention: keys; 0: unknown)
  int64_t head_dims = 0;  // attention: D + Dv
  int64_t q_dims = 0;     // attention: D
  size_t elem_bytes = 0;  // attention: q's element size
};

AnchorWork anchor_work(const Node& a) {
  AnchorWork w;
  const Value* out = a.output(0);
  const std::string& op = a.op();
  if (op == "conv" || op == "conv_transpose") {
    w.kind = WorkKind::Conv;
    const Value* wt = a.input(1);
    if (!wt || wt->shape().empty() || wt->shape()[0] <= 0) return w;
    // conv: every output element sums C/group x taps products (weight
    // [M, C/group, k...] or, nhwc, [M, k..., C/group]); conv_transpose:
    // every input element feeds M/group x taps outputs (weight [C, M/group, k...]).
    w.k = shape_numel(wt->shape()) / wt->shape()[0];
    w.flops = 2.0 * (op == "conv" ? numel(out) : numel(a.input(0))) * double(w.k);
  } else if (op == "matmul" || op == "gemm") {
    w.kind = WorkKind::Gemm;
    const Shape& s = a.input(0)->shape();
    if (s.empty()) return w;
    const bool ta = op == "gemm" && a.attrs().get_int("trans_a", 0) != 0;
    w.k = s.size() == 1 ? s[0] : (ta ? s[s.size() - 2] : s.back());
    w.flops = 2.0 * numel(out) * double(w.k);
  } else if (op == "attention") {
    w.kind = WorkKind::Attention;
    const Shape &q = a.input(0)->shape(), &k = a.input(1)->shape(), &v = a.input(2)->shape();
    if (q.size() == 4 && k.size() == 4 && v.size() == 4) {
      // S = Q K^T (Sq x Sk x D) and O = P V (Sq x Sk x Dv) per (batch, head).
      w.flops = 2.0 * double(q[0] * q[1] * q[2] * k[2]) * double(q[3] + v[3]);
      w.k = k[2];
      w.head_dims = q[3] + v[3];
      w.q_dims = q[3];
      w.elem_bytes = dtype_size(a.input(0)->dtype());
    }
  } else if (op == "einsum") {
    w.kind = WorkKind::Gemm;  // flops from the kernel's GEMM header (tile_loop_from_source's caller)
  }
  return w;
}

Math math_of(const Node* a) {
  if (!a || !a->input(0)) return Math::Fp32;
  switch (a->input(0)->dtype()) {
    case DType::F16:
      return Math::F16Tensor;
    case DType::BF16:
      return Math::BF16Tensor;
    case DType::F32:
      return a->attrs().get_int("tf32", 0) != 0 ? Math::TF32Tensor : Math::Fp32;
    default:
      return Math::Fp32;
  }
}

// Pointwise and friends: one operation per element of every result they compute.
double elementwise_flops(const Node& n) {
  if (!n.body()) {
    double f = 0;
    for (int i = 0; i < n.num_outputs(); ++i) f += numel(n.output(i));
    return f;
  }
  double f = 0;
  for (const auto& b : n.body()->nodes()) f += elementwise_flops(*b);
  return f;
}

// Each buffer once, however many arguments bind it.
double distinct_bytes(const std::vector<plan::BufferRef>& args) {
  std::set<std::tuple<int, uint32_t, uint64_t>> seen;
  double bytes = 0;
  for (const plan::BufferRef& b : args)
    if (seen.insert({static_cast<int>(b.kind), b.index, b.offset}).second) bytes += double(b.nbytes);
  return bytes;
}

// A gather reads only the elements it indexes, not its whole data operand
// (an embedding table): the bytes a kernel's buffers overstate for the
// gathers of `n` whose data comes from memory rather than from the kernel.
double gather_unread_bytes(const Node& n) {
  if (n.body()) {
    double b = 0;
    for (const auto& m : n.body()->nodes()) b += gather_unread_bytes(*m);
    return b;
  }
  if (n.op() != "gather" && n.op() != "gather_elements" && n.op() != "gather_nd") return 0;
  const Value* data = n.input(0);
  if (!data || data->producer()) return 0;
  return std::max(0.0, double(data->type().nbytes()) - double(n.output(0)->type().nbytes()));
}

// The kernel parameters a kernel's source says it touches ("// buffers: 0 3
// 5", the split-K kernels of codegen/emitters/gemm_conv/emit_gemm_mma.cpp:
// the partial GEMM does not write the result, the reduction does not read
// the GEMM operands); empty: every parameter. `tail`: those of a folded
// split-K's tail ("// tail buffers: ..."), empty when it has none.
std::vector<int> buffers_touched(const std::string& source, bool tail = false) {
  static const std::regex re(R"(// buffers:((?: \d+)+))"), tail_re(R"(// tail buffers:((?: \d+)+))");
  std::smatch m;
  std::vector<int> out;
  if (!std::regex_search(source, m, tail ? tail_re : re)) return out;
  std::istringstream in(m[1].str());
  for (int i; in >> i;) out.push_back(i);
  return out;
}

// A split-K reduction kernel: "split-K reduction of S partial sums" (S), else 0.
int64_t split_k_reduction_parts(const std::string& source) {
  static const std::regex re(R"(split-K reduction of (\d+) partial sums)");
  return find_int(source, re) > 0 ? find_int(source, re) : 0;
}

// "batch 1 x [M x N] = [M x K] [K x N]": the GEMM header comment of the
// tiled emitters (codegen/emitters/gemm_conv/emit_gemm*.cpp).
double source_gemm_flops(const std::string& source) {
  static const std::regex re(R"(batch (\d+) x \[(\d+) x (\d+)\] = \[\d+ x (\d+)\])");
  std::smatch m;
  if (!std::regex_search(source, m, re)) return 0;
  return 2.0 * std::stod(m[1].str()) * std::stod(m[2].str()) * std::stod(m[3].str()) * std::stod(m[4].str());
}

}  // namespace

TileLoop tile_loop_from_source(const std::string& source, int64_t k) {
  TileLoop t;
  // Attention (codegen/emitters/attention): BQ query rows per block, the
  // keys in tiles of BK through two stages.
  // (The SIMT attention kernel states "tiles BQ=32 BK=64" in its header.)
  static const std::regex bq(R"(\bBQ ?= ?(\d+))"), sk(R"(\bSK = (\d+))"), dv(R"(\bDV = (\d+))");
  static const std::regex bm(R"(\bBM = (\d+))"), bn(R"(\bBN = (\d+))"), bk(R"(\bBK ?= ?(\d+))");
  static const std::regex stages(R"(\bSTAGES = (\d+))"), kt(R"(\bKT = (\d+))"), kk(R"(\bK = (\d+))");
  // The GEMM header comments: "tile 64x64x32 w2x2 s3" (tensor cores), "tile 64x64x16" (SIMT).
  static const std::regex tile(R"(tile (\d+)x(\d+)x(\d+)(?: w\d+x\d+ s(\d+)(?: split(\d+))?)?)");
  const int64_t q = find_int(source, bq);
  if (q > 0) {
    const int64_t keys = find_int(source, sk) > 0 ? find_int(source, sk) : k, kb = find_int(source, bk);
    if (keys <= 0 || kb <= 0) return t;
    t.bm = static_cast<int>(q);
    t.bn = static_cast<int>(std::max<int64_t>(find_int(source, dv), 1));
    t.bk = static_cast<int>(kb);
    t.stages = 2;
    t.k_tiles = ceil_div(keys, kb);
    // Split-KV (emit_attention_tc.cpp): each block runs KV_TILES of the key tiles.
    static const std::regex kv_splits(R"(\bKV_SPLITS = (\d+))"), kv_tiles(R"(\bKV_TILES = (\d+))");
    if (find_int(source, kv_splits) > 1 && find_int(source, kv_tiles) > 0) {
      t.split = static_cast<int>(find_int(source, kv_splits));
      t.k_tiles = find_int(source, kv_tiles);
    }
    return t;
  }
  std::smatch m;
  if (std::regex_search(source, m, tile)) {
    t.bm = std::stoi(m[1].str());
    t.bn = std::stoi(m[2].str());
    t.bk = std::stoi(m[3].str());
    t.stages = m[4].matched ? std::stoi(m[4].str()) : 1;
    t.split = m[5].matched ? std::stoi(m[5].str()) : 1;
  } else if (find_int(source, bm) > 0 && find_int(source, bn) > 0 && find_int(source, bk) > 0) {
    t.bm = static_cast<int>(find_int(source, bm));
    t.bn = static_cast<int>(find_int(source, bn));
    t.bk = static_cast<int>(find_int(source, bk));
    t.stages = static_cast<int>(std::max<int64_t>(find_int(source, stages), 1));
  } else {
    return t;
  }
  int64_t tiles = find_int(source, kt);
  if (tiles <= 0) {
    const int64_t K = find_int(source, kk) > 0 ? find_int(source, kk) : k;
    tiles = K > 0 ? ceil_div(K, t.bk) : 0;
  }
  t.k_tiles = tiles;
  if (t.k_tiles <= 0) t = TileLoop{};
  return t;
}

int64_t plan_batch(const Graph& g) {
  if (g.inputs().empty() || g.inputs()[0]->shape().empty()) return 1;
  return g.inputs()[0]->shape()[0];
}

std::vector<StepWork> plan_work(const plan::Plan& p, const Graph& g) {
  const std::vector<Node*> nodes = g.node_list();
  // Registers per kernel: ptxas's (resources section), else the CUBIN's.
  std::vector<int> regs(p.kernels.size(), -1);
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    regs[i] = p.kernels[i].registers;
    if (regs[i] < 0 && !p.kernels[i].cubin.empty()) {
      try {
        regs[i] = plan::cubin_kernel_info(p.kernels[i].cubin, p.kernels[i].name).registers;
      } catch (const Error&) {
        regs[i] = -1;  // unknown: the model applies no register limit (docs/performance.md)
      }
    }
  }
  std::vector<StepWork> out;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const plan::Step& s = p.steps[i];
    StepWork sw;
    sw.step = i;
    if (s.kind == plan::StepKind::Control) {
      // Host-driven control flow: which branch or how many iterations is
      // known only at run time, so the model counts none of its launches.
      sw.node = fmt::format("#{} (control flow, regions not modelled)", s.node);
      sw.work.kind = WorkKind::Copy;
      out.push_back(std::move(sw));
      continue;
    }
    if (s.kind == plan::StepKind::Copy) {
      sw.node = s.node == UINT32_MAX ? "(graph output copy)" : fmt::format("#{}", s.node);
      sw.work.kind = WorkKind::Copy;
      sw.work.bytes = 2.0 * double(s.args.empty() ? 0 : s.args[0].nbytes);  // read + write
      out.push_back(std::move(sw));
      continue;
    }
    if (s.node >= nodes.size())
      fail("plan step {}: node #{} is not in the plan's graph ({} nodes)", i, s.node, nodes.size());
    const Node& n = *nodes[s.node];
    const plan::Kernel& k = p.kernels.at(s.kernel);
    sw.node =
        n.name().empty() ? fmt::format("#{} {}", s.node, n.op()) : fmt::format("#{} {} ({})", s.node, n.name(), n.op());
    sw.kernel = k.name;
    LaunchWork& w = sw.work;
    w.blocks = int64_t(s.grid.x) * s.grid.y * s.grid.z;
    w.threads = static_cast<int>(s.block.x * s.block.y * s.block.z);
    w.registers = regs[s.kernel];
    w.smem_bytes = static_cast<int>(std::max(k.static_shared_bytes, 0) + int64_t(s.shared_bytes));
    std::vector<plan::BufferRef> touched;
    for (int b : buffers_touched(k.source))
      if (b >= 0 && size_t(b) < s.args.size()) touched.push_back(s.args[size_t(b)]);
    w.bytes = std::max(distinct_bytes(touched.empty() ? s.args : touched) - gather_unread_bytes(n), 0.0);
    // A folded split-K GEMM: its last blocks' sums ("// tail buffers:"), one per tile.
    if (const std::vector<int> tail = buffers_touched(k.source, true); !tail.empty()) {
      std::vector<plan::BufferRef> tb;
      for (int b : tail)
        if (b >= 0 && size_t(b) < s.args.size()) tb.push_back(s.args[size_t(b)]);
      w.tail_bytes = distinct_bytes(tb);
      const int64_t splits = std::max(tile_loop_from_source(k.source, 0).split, 1);
      w.tail_blocks = std::max<int64_t>(w.blocks / splits, 1);
    }
    // The epilogue's accesses ("// epilogue: 8-element accesses, 2 per 8 elements, 4 bytes per element").
    static const std::regex epi_re(
        R"(// epilogue: (\d+)-element accesses, (\d+) per \d+ elements, (\d+) bytes per element)");
    if (std::smatch em; std::regex_search(k.source, em, epi_re)) {
      w.epilogue_width = std::stoi(em[1].str());
      w.epilogue_accesses = std::stoi(em[2].str());
      w.epilogue_bytes = std::stoi(em[3].str());
    }
    const Node* a = anchor_of(n);
    AnchorWork aw;
    if (a) aw = anchor_work(*a);
    sw.anchor = a ? a->op() : n.op();
    if (const int64_t parts = split_k_reduction_parts(k.source); parts > 0) {
      // The second launch of a split-K GEMM/conv: it sums the partial results
      // (an "other" kind: no tile loop), then runs the epilogue.
      sw.anchor = "split-K reduction";
      w.math = Math::Fp32;
      w.flops = a ? double(parts) * numel(a->output(0)) : 0.0;
      out.push_back(std::move(sw));
      continue;
    }
    w.kind = aw.kind;
    if (is_heavy(aw.kind)) {
      w.math = math_of(a);
      w.flops = aw.flops > 0 ? aw.flops : source_gemm_flops(k.source);
      w.tile = tile_loop_from_source(k.source, aw.k);
      w.wgmma = k.source.find(", wgmma sm_90a); tile ") != std::string::npos;  // emit_gemm_wgmma_tiled.cpp's header
      if (w.tile.k_tiles > 0) {
        const double depth = double(w.tile.k_tiles) * w.tile.bk;  // K rounded up to whole tiles
        // Attention: BQ query rows against every key, S = Q K^T then P V (D + Dv per key).
        w.block_flops = aw.kind == WorkKind::Attention ? 2.0 * w.tile.bm * depth * double(aw.head_dims)
                                                       : 2.0 * w.tile.bm * w.tile.bn * depth;
        // Attention: each block streams its Q tile and its keys' K/V rows from L2.
        if (aw.kind == WorkKind::Attention)
          w.l2_bytes = double(w.blocks) * double(aw.elem_bytes) *
                       (depth * double(aw.head_dims) + double(w.tile.bm) * double(aw.q_dims));
        // GEMM/conv: each block streams its A (bm x depth) and B (depth x bn)
        // panels through L2, whichever tiles share them.
        else if (a && a->num_inputs() > 0 && a->input(0))
          w.l2_bytes =
              double(w.blocks) * double(dtype_size(a->input(0)->dtype())) * depth * double(w.tile.bm + w.tile.bn);
      }
    } else {
      w.math = Math::Fp32;
      w.flops = elementwise_flops(n);
    }
    out.push_back(std::move(sw));
  }
  return out;
}

}  // namespace kiln::perf
