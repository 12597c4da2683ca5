#include "codegen/emitters/gemm_conv/emit_gemm_row_norm.h"

#include <algorithm>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "codegen/core/deciding_only.h"
#include "codegen/emitters/gemm_conv/emit_epilogue.h"
#include "codegen/emitters/gemm_conv/gemm_tile_cost.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "codegen/emitters/reduction/emit_fused_reduction.h"
#include "codegen/emitters/reduction/emit_normalization.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

const Node* row_norm_of(const Node& n) {
  if (n.op() != "fused" || !n.body() || n.attrs().get_string("kind", "") != "gemm_epilogue") return nullptr;
  for (const auto& bn : n.body()->nodes())
    if (bn->op() == "layer_normalization") return bn.get();
  return nullptr;
}

namespace {

// Whether `t` holds the anchor's elements in rows of its N: the same count,
// the same last dim (reshapes keep the flat index).
bool same_rows(const TensorType& t, const TensorType& anchor) {
  return t.numel() == anchor.numel() && t.rank() > 0 && anchor.rank() > 0 && t.shape.back() == anchor.shape.back();
}

// The body's shape: the matmul (or a gemm adding C at alpha = beta = 1)
// first, pointwise ops, identities and reshapes keeping its rows, the one
// layer norm over the last axis, then such ops again; every result holding
// the GEMM's rows. Returns the anchor.
const Node& check_body(const Node& n, const OpRegistry& ops, const Node& ln) {
  const Graph& body = *n.body();
  const Node* anchor = body.nodes().empty() ? nullptr : body.nodes().front().get();
  if (!anchor || (anchor->op() != "matmul" && anchor->op() != "gemm"))
    unsupported(
        "codegen: {}: a layer norm in a GEMM's epilogue rides a matmul's or gemm's split-K reduction; the body starts "
        "with {}",
        n.describe(), anchor ? anchor->op() : std::string("nothing"));
  const TensorType& mt = anchor->output(0)->type();
  if (anchor->op() == "gemm") {
    const float beta = anchor->attrs().get_float("beta", 1.0f);
    const bool c = anchor->num_inputs() > 2 && anchor->input(2) && beta != 0.0f;
    if (anchor->attrs().get_float("alpha", 1.0f) != 1.0f || (c && beta != 1.0f))
      unsupported("codegen: {}: a gemm with alpha or beta other than 1 before a layer norm", n.describe());
  }
  for (const auto& bn : body.nodes()) {
    for (int r = 0; r < bn->num_outputs(); ++r)
      if (has_symbolic_dims(bn->output(r)->shape()))
        unsupported("codegen: {}: a shape-generic GEMM is not split in K, which a layer norm in its epilogue needs",
                    n.describe());
    if (bn.get() == anchor || bn.get() == &ln) continue;
    if (bn->op() == "layer_normalization")
      unsupported("codegen: {}: two layer norms in one GEMM epilogue", n.describe());
    const OpDef* def = ops.find(bn->op());
    const bool pointwise = def && def->category == OpCategory::Pointwise && def->expr && !bn->body();
    if (!pointwise && bn->op() != "identity" && bn->op() != "reshape")
      unsupported("codegen: {}: {} in the epilogue of a GEMM with a layer norm (only pointwise ops and reshapes)",
                  n.describe(), bn->describe());
    if (!same_rows(bn->output(0)->type(), mt))
      unsupported("codegen: {}: {} gives {}, not the rows of the GEMM's {}", n.describe(), bn->describe(),
                  bn->output(0)->type().str(), mt.str());
  }
  for (Value* v : anchor->inputs())
    if (v && std::find(body.inputs().begin(), body.inputs().end(), v) == body.inputs().end())
      unsupported("codegen: {}: the GEMM's operands must be the node's inputs", n.describe());
  const TensorType& x = ln.input(0)->type();
  int64_t axis = ln.attrs().get_int("axis", -1);
  if (axis < 0) axis += x.rank();
  if (!same_rows(x, mt) || axis != x.rank() - 1)
    unsupported(
        "codegen: {}: the layer norm must normalize the GEMM's rows (the last axis of {}); it normalizes from axis {} "
        "of {}",
        n.describe(), mt.str(), axis, x.str());
  for (int r = 1; r < ln.num_outputs(); ++r)
    if (ln.output(r)->has_uses() || body.is_output(ln.output(r)))
      unsupported("codegen: {}: the layer norm's mean and inverse deviation are not written", n.describe());
  for (const Value* v : body.outputs())
    if (!same_rows(v->type(), mt))
      unsupported("codegen: {}: result %{} {} does not hold the GEMM's rows", n.describe(), v->name(), v->type().str());
  return *anchor;
}

// A scratch graph holding one fused node with `n`'s inputs and results.
struct Scratch {
  Graph outer{"row_norm_gemm"};
  std::vector<Value*> inputs;
  explicit Scratch(const Node& n) {
    for (int i = 0; i < n.num_inputs(); ++i)
      inputs.push_back(outer.add_input(fmt::format("x{}", i), n.input(i)->type()));
  }
};

std::vector<TensorType> result_types(const Node& n) {
  std::vector<TensorType> t;
  for (int r = 0; r < n.num_outputs(); ++r) t.push_back(n.output(r)->type());
  return t;
}

// `v` as dtype `to`: a cast, or an identity where it already is.
Node* as_dtype(Graph& g, Value* v, const TensorType& to, Node* before = nullptr) {
  if (v->dtype() == to.dtype) return g.add_node("identity", {v}, {to}, {}, "", before);
  AttrMap a;
  a.set("to", std::string(dtype_name(to.dtype)));
  return g.add_node("cast", {v}, {to}, std::move(a), "", before);
}

// The split GEMM: a gemm_epilogue node of `n`'s inputs and results whose
// body is the matmul alone (each result its value, cast), so its kernel takes
// the very parameters `n`'s kernels do; its epilogue is never run (a split
// kernel writes partial sums).
Node& partial_node(Scratch& s, const Node& n, const Node& anchor) {
  const Graph& body = *n.body();
  auto pb = std::make_unique<Graph>("split_gemm");
  std::vector<Value*> ins;
  for (Value* v : body.inputs()) ins.push_back(pb->add_input(v->name(), v->type()));
  auto slot = [&](const Value* v) {
    return ins[static_cast<size_t>(std::find(body.inputs().begin(), body.inputs().end(), v) - body.inputs().begin())];
  };
  std::vector<Value*> operands;
  for (Value* v : anchor.inputs()) operands.push_back(v ? slot(v) : nullptr);
  Node* mm = pb->add_node(anchor.op(), operands, {anchor.output(0)->type()}, anchor.attrs(), anchor.name());
  std::vector<Value*> outs;
  for (int r = 0; r < n.num_outputs(); ++r) {
    const TensorType& t = n.output(r)->type();
    Value* v = mm->output(0);
    if (v->shape() != t.shape) {
      AttrMap a;
      a.set("shape", std::vector<int64_t>(t.shape.begin(), t.shape.end()));
      TensorType rt = v->type();
      rt.shape = t.shape;
      v = pb->add_node("reshape", {v}, {rt}, std::move(a))->output(0);
    }
    outs.push_back(as_dtype(*pb, v, t)->output(0));
  }
  pb->set_outputs(outs);
  AttrMap a;
  a.set("kind", std::string("gemm_epilogue"));
  Node* p = s.outer.add_node("fused", s.inputs, result_types(n), std::move(a), n.name());
  p->set_body(std::move(pb));
  return *p;
}

// The norm kernel's node: a fused `reduction` node of `n`'s inputs and one
// more, `sum` (the GEMM's f32 accumulators), and `n`'s results, whose body is
// `n`'s with the GEMM replaced by `sum` (plus a gemm's C in f32, as the GEMM
// kernel's finishing step adds it) cast to its dtype.
Node& norm_node(Scratch& s, const Node& n, Value*& sum) {
  std::unique_ptr<Graph> qb = n.body()->clone();
  Node* mm = qb->nodes().front().get();
  TensorType f32 = mm->output(0)->type();
  f32.dtype = DType::F32;
  sum = qb->add_input("kiln_split_sum", f32);
  Value* r = sum;
  if (mm->op() == "gemm" && mm->num_inputs() > 2 && mm->input(2) && mm->attrs().get_float("beta", 1.0f) != 0.0f) {
    TensorType ct = mm->input(2)->type();
    ct.dtype = DType::F32;
    Value* c32 = as_dtype(*qb, mm->input(2), ct, mm)->output(0);
    r = qb->add_node("add", {r, c32}, {f32}, {}, "", mm)->output(0);
  }
  Node* c = as_dtype(*qb, r, mm->output(0)->type(), mm);
  qb->replace_all_uses(mm->output(0), c->output(0));
  qb->erase_node(mm);
  std::vector<Value*> ins = s.inputs;
  ins.push_back(s.outer.add_input("sum", f32));
  AttrMap a;
  a.set("kind", std::string("reduction"));
  Node* q = s.outer.add_node("fused", ins, result_types(n), std::move(a), n.name());
  q->set_body(std::move(qb));
  return *q;
}

}  // namespace

RowNormGemmKernels emit_gemm_row_norm(const Node& n, const OpRegistry& ops) {
  const Node* ln = row_norm_of(n);
  KILN_CHECK(ln, "codegen: {} has no layer norm in its epilogue", n.describe());
  const Node& anchor = check_body(n, ops, *ln);
  RowNormGemmKernels out;
  Scratch s(n);

  // 1. The split GEMM, its tile the model's cheapest split with a reduction
  // kernel (the emitter asks the chooser exactly once).
  const Node& p = partial_node(s, n, anchor);
  const Epilogue ep = Epilogue::from_fused(p, ops, {"matmul", "gemm"});
  int out_bytes = 0;
  for (int r = 0; r < n.num_outputs(); ++r) out_bytes += static_cast<int>(dtype_size(n.output(r)->dtype()));
  const int in_bytes = static_cast<int>(dtype_size(ln->input(0)->dtype()));
  std::vector<ComputeKernel> ks;
  {
    const ScopedGemmTileChooser chooser([&](const GemmProblem& prob) -> std::optional<GemmTileConfig> {
      std::optional<GemmTileConfig> c = row_norm_gemm_tile(prob, row_norm_launch_us(prob, in_bytes, out_bytes));
      if (!c)
        unsupported(
            "codegen: {}: the layer norm after the {} ({}) runs in the split-K reduction kernel, and by the "
            "performance model no split of this GEMM{} pays for it",
            n.describe(), anchor.op(), gemm_problem_key(prob),
            prob.math == GemmMath::Simt ? " (SIMT: f32 operands without tf32)" : "");
      return c;
    });
    ks = emit_matmul_gemm(ep);
  }
  const int64_t part = anchor.output(0)->type().numel();  // a split's partial result
  KILN_CHECK(ks.size() == 2 && ks[0].workspace_f32 > 0 && part > 0 && ks[0].workspace_f32 % part == 0,
             "codegen: {}: the split GEMM gave {} kernels", n.describe(), ks.size());
  out.gemm = std::move(ks[0]);
  out.workspace_f32 = out.gemm.workspace_f32;
  const int64_t splits = out.workspace_f32 / part;

  // 2. The reduction kernel: the layer norm's row kernel reading its operand
  // through the body, the GEMM's elements summed from the workspace.
  Value* sum = nullptr;
  const Node& q = norm_node(s, n, sum);
  FusedAnchor fa = fused_anchor_io(q, ops, {{sum, "kiln_split_sum"}});
  KILN_CHECK(fa.anchor && fa.anchor->op() == "layer_normalization", "codegen: {}: no layer norm anchor", n.describe());
  fa.io.buffers.push_back({"ws", DType::F32, false, out.workspace_f32});
  fa.io.setup = fmt::format(
                    "  const auto kiln_split_sum = [&](long long i) -> float {{\n"
                    "    float s = 0.0f;  // split order: the bits do not depend on which block ran first\n"
                    "    for (int k = 0; k < {}; ++k) s += ws[k * {}LL + i];\n"
                    "    return s;\n  }};\n",
                    splits, part) +
                fa.io.setup;
  std::vector<TensorType> operands, results;
  for (Value* v : fa.anchor->inputs()) operands.push_back(v->type());
  for (int r = 0; r < fa.anchor->num_outputs(); ++r) results.push_back(fa.anchor->output(r)->type());
  out.norm = emit_normalization(ops.get("layer_normalization"), fa.anchor->attrs(), operands, results, fa.io);
  out.norm_constants = fa.constants;
  if (deciding_only()) return out;
  // What kiln inspect --perf reads (perf/plan_work.cpp): the kernel is the
  // split's reduction, touching every parameter but the GEMM's A and B.
  const int nr = n.num_outputs(), ni = n.num_inputs(), nc = static_cast<int>(fa.constants.size());
  std::string touched = "// buffers:";
  for (int b = 0; b < nr + ni + nc + 1; ++b) {
    const int in = b - nr;
    const bool operand = in >= 0 && in < ni && (ep.anchor_slot(0) == in || ep.anchor_slot(1) == in);
    if (!operand) touched += fmt::format(" {}", b);
  }
  out.norm.source = fmt::format(
                        "// {}: split-K reduction of {} partial sums, then the epilogue and a layer norm of "
                        "each row of {}\n{}\n",
                        n.name().empty() ? anchor.op() : n.name(), splits, anchor.output(0)->type().str(), touched) +
                    out.norm.source;
  return out;
}

}  // namespace kiln::codegen
