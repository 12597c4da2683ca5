#include "compiler/plan_in_place.h"

#ifdef KILN_HAVE_CODEGEN
#include <algorithm>

#include "codegen/emitters/attention/emit_kv_append.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "compiler/plan_launch_check.h"
#include "ir/error.h"
#include "passes/kv_cache_in_place.h"
#include "runtime/plan_in_place.h"

namespace kiln::planbuild {

namespace {

size_t index_in(const std::vector<Value*>& vs, const Value* v) {
  return static_cast<size_t>(std::find(vs.begin(), vs.end(), v) - vs.begin());
}

// The concat's one kernel step, writing the present (output `out`) whole
// from its start: the step the append replaces. Null when the concat became
// anything else (several kernels, a copy).
const plan::Step* concat_step(const std::vector<plan::Step>& steps, uint32_t node, size_t out, size_t* at) {
  const plan::Step* found = nullptr;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].node != node) continue;
    if (found || steps[i].kind != plan::StepKind::Kernel) return nullptr;
    found = &steps[i];
    *at = i;
  }
  if (!found || found->param_table || found->args.size() != 3) return nullptr;
  const plan::BufferRef& r = found->args[0];
  return r.kind == plan::BufferKind::Output && r.index == out && r.offset == 0 ? found : nullptr;
}

}  // namespace

void add_in_place_appends(const Graph& g, Builder& b, const std::vector<std::string>& archs,
                          std::vector<std::vector<codegen::CompiledKernel>>& compiled) {
  if (b.nks.origin.empty()) return;  // a static plan: no profiles, nothing marked
  plan::Plan& p = b.p;
  uint32_t pos = 0;
  for (const auto& np : g.nodes()) {
    const uint32_t node = pos++;
    const Node& n = *np;
    if (n.op() != "concat" || n.attrs().get_int("in_place_append", 0) != 1 || n.num_inputs() != 2) continue;
    auto from = b.nks.origin.find(&n);
    KILN_CHECK(from != b.nks.origin.end() && from->second->owner(), "node {} has no symbolic origin", n.describe());
    const Node& sn = *from->second;  // the symbolic graph's concat: its sizes as polynomials
    const Graph& sg = *sn.owner();
    const size_t in = index_in(sg.inputs(), sn.input(0)), out = index_in(sg.outputs(), sn.output(0));
    if (in == sg.inputs().size() || out == sg.outputs().size()) continue;
    const std::string sym = kv_capacity_symbol(in);
    if (!plan::why_not_in_place_on_gpu(sn, sym).empty()) continue;  // the runtime says why when asked to bind
    size_t at = 0;
    const plan::Step* concat = concat_step(p.steps, node, out, &at);
    if (!concat) continue;
    const int rank = sn.input(0)->type().rank();
    int64_t axis = sn.attrs().get_int("axis", 0);
    if (axis < 0) axis += rank;
    const codegen::KvAppendKernel k =
        codegen::emit_kv_append(sn.output(0)->dtype(), sn.input(0)->shape(), sn.input(1)->shape(), int(axis), sym);
    // Compiled on its own: the kernels compiled before the plan
    // (PlanBuildOptions::kernels) are the nodes', and this is no node's.
    codegen::KernelCache cache(b.o.kernel_cache_dir);
    for (size_t a = 0; a < archs.size(); ++a) {
      codegen::KernelCompiler compiler(archs[a], b.o.use_cache ? &cache : nullptr);
      compiled[a].push_back(compiler.compile({{k.name, k.source}}).at(0));
    }
    plan::InPlaceAppend ip;
    ip.input = static_cast<uint32_t>(in);
    ip.output = static_cast<uint32_t>(out);
    ip.axis = static_cast<uint32_t>(axis);
    ip.capacity_symbol = sym;
    ip.concat_step = static_cast<uint32_t>(at);
    plan::Step& s = ip.append;
    s.node = node;
    s.kernel = static_cast<uint32_t>(b.sources.size());
    s.block = {k.block, 1, 1};
    s.args = {concat->args[0], concat->args[2]};  // (present, new): the concat binds (present, past, new)
    ip.launch.step = ip.concat_step;
    ip.launch.symbols = k.symbols;
    uint32_t* at_max[3] = {&s.grid.x, &s.grid.y, &s.grid.z};
    for (int a = 0; a < 3; ++a) {
      ip.launch.grid[a] = {dim_poly(k.grid[a].items), static_cast<uint64_t>(k.grid[a].per_block), k.grid[a].cap,
                           static_cast<uint64_t>(k.grid[a].multiplier)};
      *at_max[a] = plan::eval_grid_axis(ip.launch.grid[a], b.largest);
    }
    b.sources.push_back({k.name, k.source});
    b.kernel_index.emplace(k.name, s.kernel);
    check_launch_fits(s, sn, k.source, k.name, -1, -1, "", b.o);
    b.launched.emplace_back(s, &sn);
    p.in_place_appends.push_back(std::move(ip));
  }
}

}  // namespace kiln::planbuild
#endif
