// GEMM size buckets (compiler/plan_writer_variants.h gemm_row_buckets), also
// for channels-last convs over a symbolic image (their implicit GEMM's rows
// are the images x positions): the
// shape-generic GEMM's one tile is chosen for thousands of rows; for a range
// of fewer (or more) rows another tile may keep more SMs busy. Candidates are
// the generic kernels emitted again for a few representative row counts;
// the performance model picks, at shapes sampled across the profiles, the
// fastest, and runs of samples with the same non-default winner become
// buckets.
#include "compiler/plan_writer_variants.h"

#ifdef KILN_HAVE_CODEGEN
#include <algorithm>
#include <cmath>
#include <set>

#include "codegen/emitter_table.h"
#include "codegen/emitters/gemm_conv/emit_gemm.h"
#include "codegen/launch_fit.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "perf/plan_work.h"
#include "runtime/plan_generic_launches.h"

namespace kiln::planbuild {

namespace {

constexpr int kSamples = 8;                                // shapes sampled across the symbols' ranges
constexpr int64_t kCandidateRows[] = {16, 64, 256, 1024};  // representative rows of the candidate tiles

// A channels-last conv: one implicit GEMM whose M is the images x output
// positions, its result's dims but the last, so its rows are a GEMM's
// (a channels-first conv's GEMM batch is the images and its N the
// positions, which the row hint does not describe).
bool nhwc_conv(const Node& n) { return n.op() == "conv" && n.attrs().get_string("layout", "nchw") == "nhwc"; }

// The node a (fused) node's GEMM comes from: a matmul, gemm or nhwc conv, else null.
const Node* gemm_anchor(const Node& n) {
  auto anchor = [](const Node& m) { return m.op() == "matmul" || m.op() == "gemm" || nhwc_conv(m); };
  if (anchor(n)) return &n;
  if (n.op() != "fused" || !n.body()) return nullptr;
  for (const auto& m : n.body()->nodes())
    if (anchor(*m)) return m.get();
  return nullptr;
}

bool tiled(const std::vector<codegen::NodeKernel>& ks) {
  return std::any_of(ks.begin(), ks.end(), [](const codegen::NodeKernel& k) {
    return k.shape_generic() && perf::tile_loop_from_source(k.source, 512).k_tiles > 0;
  });
}

std::set<std::string> names(const std::vector<codegen::NodeKernel>& ks) {
  std::set<std::string> s;
  for (const codegen::NodeKernel& k : ks) s.insert(k.name);
  return s;
}

}  // namespace

RowBuckets gemm_row_buckets(const Graph& g, const Graph& at_max, const NodeKernels& nks, const PlanBuildOptions& o) {
  RowBuckets out;
  if (o.profiles.empty() || g.symbols().empty() || o.opt_variants == "none") return out;
  // The sampled shapes: every symbol from its smallest to its largest value
  // together, geometrically (a symbol's range spans every profile).
  std::vector<SymbolBindings> samples;
  for (int t = 0; t < kSamples; ++t) {
    SymbolBindings b;
    for (const SymbolDecl& d : g.symbols()) {
      const double lo = std::max<double>(d.min, 1), hi = std::max<double>(d.max, lo);
      b[d.name] = std::clamp<int64_t>(std::llround(lo * std::pow(hi / lo, double(t) / (kSamples - 1))), d.min, d.max);
    }
    if (samples.empty() || samples.back() != b) samples.push_back(b);
  }
  if (samples.size() < 2) return out;
  std::vector<std::unique_ptr<Graph>> at_sample;
  const perf::GpuSpec& gpu = model_gpu(o);
  const std::vector<Node*> sym_nodes = g.node_list(), max_nodes = at_max.node_list();
  codegen::LaunchBounder bounder;
  for (size_t i = 0; i < sym_nodes.size(); ++i) {
    auto have = nks.of.find(max_nodes[i]);
    const Node* anchor = gemm_anchor(*sym_nodes[i]);
    if (have == nks.of.end() || !anchor || !tiled(*have->second)) continue;
    // The anchor's rows (a conv epilogue's ops keep its shape; a GEMM's may reshape).
    const Shape& shape = (nhwc_conv(*anchor) ? anchor : sym_nodes[i])->output(0)->shape();
    if (shape.size() < 2) continue;
    const DimPoly rows = dim_poly(dim_product(Shape(shape.begin(), shape.end() - 1)));
    if (rows.size() == 1 && rows.begin()->first.empty()) continue;  // static rows
    // Candidates: the kernels for other representative rows, where their tile differs.
    std::vector<std::pair<int64_t, std::unique_ptr<std::vector<codegen::NodeKernel>>>> cands;
    std::set<std::set<std::string>> seen = {names(*have->second)};
    for (int64_t r : kCandidateRows) {
      codegen::ScopedGenericGemmRows hint(r);
      auto ks = std::make_unique<std::vector<codegen::NodeKernel>>(emit_node(*sym_nodes[i], bounder, o));
      if (seen.insert(names(*ks)).second) cands.emplace_back(r, std::move(ks));
    }
    if (cands.empty()) continue;
    if (at_sample.empty())
      for (const SymbolBindings& b : samples) at_sample.push_back(specialize_graph(g, b, op_registry()));
    // Per sample: its rows and the winning candidate (-1: the default tile).
    std::vector<int64_t> sample_rows;
    std::vector<int> best;
    const uint32_t pos = static_cast<uint32_t>(i);
    for (size_t t = 0; t < samples.size(); ++t) {
      sample_rows.push_back(plan::eval_poly(rows, samples[t]));
      const double base = estimate_us(*at_sample[t], pos, *have->second, samples[t], gpu);
      int win = -1;
      double win_us = base;
      for (size_t c = 0; c < cands.size(); ++c) {
        const double us = estimate_us(*at_sample[t], pos, *cands[c].second, samples[t], gpu);
        if (us < win_us && gain_pays(base, us)) win = static_cast<int>(c), win_us = us;
      }
      best.push_back(win);
    }
    // Runs of one winner: buckets with edges halfway between samples.
    std::vector<RowBucket> bs;
    const int64_t rows_min = sample_rows.front(), rows_max = sample_rows.back();
    for (size_t t = 0; t < best.size();) {
      size_t e = t;
      while (e + 1 < best.size() && best[e + 1] == best[t]) ++e;
      if (best[t] >= 0 && static_cast<int>(bs.size()) < kMaxBuckets) {
        RowBucket rb;
        rb.rows = rows;
        rb.lo = t == 0 ? rows_min : (sample_rows[t - 1] + sample_rows[t]) / 2 + 1;
        rb.hi = e + 1 == best.size() ? rows_max : (sample_rows[e] + sample_rows[e + 1]) / 2;
        rb.tile_rows = cands[size_t(best[t])].first;
        rb.kernels = std::make_unique<std::vector<codegen::NodeKernel>>(*cands[size_t(best[t])].second);
        if (rb.lo <= rb.hi) bs.push_back(std::move(rb));
      }
      t = e + 1;
    }
    if (!bs.empty()) out.emplace(max_nodes[i], std::move(bs));
  }
  return out;
}

}  // namespace kiln::planbuild
#endif
