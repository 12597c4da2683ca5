#include "codegen/emitters/gemm_conv/emit_conv.h"

#include <xxhash.h>

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/launch_fit.h"
#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/op_helpers.h"

namespace kiln::codegen {

namespace {

struct ConvGeom {
  int nd = 0;
  int64_t N = 0, C = 0, M = 0, group = 1, Cg = 0, Mg = 0;
  Shape in, k, out;  // spatial
  std::vector<int64_t> strides, dilations, pads;
  int64_t in_size = 1, k_size = 1, out_size = 1;
};

std::vector<int64_t> ints_or(const AttrMap& a, const char* name, size_t n, int64_t dflt) {
  std::vector<int64_t> v = a.get_ints(name);
  if (v.empty()) v.assign(n, dflt);
  if (v.size() != n) fail("codegen: conv attribute {} has {} values, expected {}", name, v.size(), n);
  return v;
}

// `out` is the anchor's result shape (channels first).
ConvGeom geometry(const Node& n, const Shape& xs, const Shape& ws, const Shape& ys, bool transpose) {
  ConvGeom g;
  g.nd = static_cast<int>(xs.size()) - 2;
  KILN_CHECK(g.nd >= 1 && ws.size() == xs.size() && ys.size() == xs.size(), "codegen: {}: conv ranks", n.describe());
  g.group = n.attrs().get_int("group", 1);
  g.N = xs[0];
  g.C = xs[1];
  g.Cg = g.C / g.group;
  g.M = ys[1];
  g.Mg = g.M / g.group;
  g.in.assign(xs.begin() + 2, xs.end());
  g.k.assign(ws.begin() + 2, ws.end());
  g.out.assign(ys.begin() + 2, ys.end());
  g.strides = ints_or(n.attrs(), "strides", g.nd, 1);
  g.dilations = ints_or(n.attrs(), "dilations", g.nd, 1);
  g.pads = ints_or(n.attrs(), "pads", 2 * g.nd, 0);
  // Shape-generic (a plan with shape profiles): the batch and the spatial
  // dims of x and y may be symbolic (sizes from `ks`), channels and weights not.
  for (const Shape* s : {&xs, &ws, &ys})
    for (size_t d = s == &ws ? 0 : 1; d < (s == &ws ? s->size() : 2); ++d)
      if (is_symbolic_dim((*s)[d]))
        unsupported("codegen: {}: a shape-generic conv takes a symbolic batch and image size, not [{}] (dim {} is {})",
                    n.describe(), dims_str(*s), d, dim_str((*s)[d]));
  g.in_size = dim_product(g.in);
  g.k_size = shape_numel(g.k);
  g.out_size = dim_product(g.out);
  return g;
}

// C text of a dim: its number, or a symbolic dim's polynomial over `ks` (size_expr.h).
std::string dim_text(const KernelSymbols& syms, int64_t d) {
  return is_symbolic_dim(d) ? syms.lit(d) : std::to_string(d);
}
// `(unsigned)x < <bound>`'s bound: "8u", or "(unsigned)(...)" for a symbolic dim.
std::string unsigned_bound(const KernelSymbols& syms, int64_t d) {
  return is_symbolic_dim(d) ? "(unsigned)" + syms.lit(d) : std::to_string(d) + "u";
}

// `var` (an int in [0, prod(dims))) split into coordinates <p>0.. over dims.
void split_index(const std::string& var, const Shape& dims, const std::string& p, const std::string& ind,
                 std::string& b, const KernelSymbols& syms = {}) {
  const int r = static_cast<int>(dims.size());
  b += fmt::format("{}int {}r = {};\n", ind, p, var);
  for (int d = r - 1; d >= 0; --d) {
    const std::string dt = dim_text(syms, dims[d]);
    if (d == 0) b += fmt::format("{}const int {}{} = {}r;\n", ind, p, d, p);
    else if (is_symbolic_dim(dims[d]))
      b += fmt::format("{}const int {}{} = (int)({}r % {}); {}r /= {};\n", ind, p, d, p, dt, p, dt);
    else b += fmt::format("{}const int {}{} = {}r % {}; {}r /= {};\n", ind, p, d, p, dt, p, dt);
  }
}

// The implicit GEMM indexes its rows, columns and reduction with 32-bit ints
// (emit_gemm*.cpp: a tile's origin plus its row or column, the k index), and
// so do the conv coordinates split from them (split_index). Widening them
// would cost every conv its 32-bit integer throughput, so an extent that
// does not fit is refused instead, at its largest value: the maxima of the
// symbols the node's graph declares (a plan's profile max; the runtime
// refuses shapes outside the profiles). A tile's margin past the extent
// (the largest tile edge, 256) must fit too.
constexpr int64_t kLargestTileEdge = 256;

// Each symbol at its largest value (the node's graph declares the ranges).
SymbolBindings largest_symbols(const Node& n) {
  SymbolBindings b;
  if (const Graph* g = n.owner())
    for (const SymbolDecl& d : g->symbols()) b[d.name] = d.max;
  return b;
}

// The GEMM extent `what` (dims `dims` multiplied) at its largest: kiln::Unsupported
// naming the node and the product when it (plus a tile) does not fit an int.
void check_32bit_extent(const Node& n, const char* what, const std::vector<int64_t>& dims, const SymbolBindings& at) {
  std::vector<std::string> factors;
  int64_t value = 1;
  bool over = false, symbolic = false;
  for (int64_t d : dims) {
    int64_t v = d;
    try {
      v = substitute_dim(d, at);
    } catch (const Error&) {  // past int64: surely past int32
      over = true;
    }
    symbolic = symbolic || is_symbolic_dim(v);
    factors.push_back(is_symbolic_dim(d) && !is_symbolic_dim(v) ? fmt::format("{} (at most {})", dim_str(d), v)
                                                                : dim_str(v));
    if (!over && !is_symbolic_dim(v)) over = __builtin_mul_overflow(value, v, &value);
  }
  if (symbolic)
    unsupported(
        "codegen: {}: the implicit GEMM's {} ({}) has no largest value (a symbol without a declared range), "
        "so its 32-bit indices cannot be checked",
        n.describe(), what, fmt::join(factors, " x "));
  if (over || value > INT32_MAX - kLargestTileEdge)
    unsupported(
        "codegen: {}: the implicit GEMM's {} = {} = {} exceed its 32-bit indices (at most {} with a tile's "
        "margin)",
        n.describe(), what, fmt::join(factors, " x "), over ? std::string("more than 2^63") : std::to_string(value),
        INT32_MAX - kLargestTileEdge);
}

// Depthwise conv (one input and one output channel per group): one thread per output element
// (grid-stride loop) summing its taps -- a GEMM with Mg = 1 would leave 15 of 16 tile rows idle.
ComputeKernel emit_depthwise(const Epilogue& ep, const ConvGeom& G, bool nhwc) {
  const Node& n = ep.anchor();
  const DType dt = n.input(0)->dtype();
  const char* idx = ep.index_type();
  const int nd = G.nd;
  const int sx = ep.anchor_slot(0), sw = ep.anchor_slot(1), sbias = ep.anchor_slot(2);
  // Shape-generic: a symbolic batch or image size makes the sizes polynomials of `ks`.
  const KernelSymbols& syms = ep.symbols();
  const bool generic = !syms.empty();
  const int64_t total = dim_mul(dim_mul(G.N, G.M), G.out_size);
  const std::string total_text = generic ? syms.lit(total) : std::to_string(total);
  const std::string ct = dt == DType::F64 ? "double" : "float";
  // The launch, and the epilogue's store (the only step after this that can
  // refuse); then, when only deciding, no text (codegen/core/deciding_only.h).
  ComputeKernel k;
  k.block = block_threads(256);  // grid-stride: any block (codegen/launch_fit.h)
  if (generic) {
    k.symbols = syms.names();
    k.grid_expr = GridAxisExpr{total, k.block, 8192};
    k.grid = 1;  // evaluated per shape
  } else {
    k.grid = static_cast<unsigned>(std::min<int64_t>((total + k.block - 1) / k.block, 8192));
  }
  const std::string store = ep.code("acc", "i", "    ");
  if (deciding_only()) return k;
  const std::vector<int64_t> istr = generic ? symbolic_strides(G.in) : strides_of(G.in);
  std::string b = fmt::format("// depthwise conv{}: {} channels, taps {}\n", nhwc ? " nhwc" : "", G.M, G.k_size);
  if (generic) b += KernelSymbols::struct_text();
  b += fmt::format("extern \"C\" __global__ void @NAME@({}{}) {{\n", ep.params(), generic ? ", kiln_syms ks" : "");
  b += fmt::format(
      "  for ({} i = ({})(blockIdx.x * blockDim.x + threadIdx.x); i < {}; i += ({})(gridDim.x * "
      "blockDim.x)) {{\n",
      idx, idx, total_text, idx);
  // Coordinates: nchw (img, m, o...), nhwc (img, o..., m).
  b += fmt::format("    {} r = i;\n", idx);
  if (nhwc) b += fmt::format("    const int m = (int)(r % {}); r /= {};\n", G.M, G.M);
  for (int d = nd - 1; d >= 0; --d)
    b += fmt::format("    const int o{} = (int)(r % {}); r /= {};\n", d, dim_text(syms, G.out[d]),
                     dim_text(syms, G.out[d]));
  if (!nhwc) b += fmt::format("    const int m = (int)(r % {}); r /= {};\n", G.M, G.M);
  b += "    const int img = (int)r;\n";
  // x offset of the window's channel; w [M, taps] in both layouts (nhwc: [M, k..., 1]).
  const std::string cstride = nhwc ? "1" : dim_text(syms, G.in_size);
  const std::string pstride = nhwc ? std::to_string(G.C) : "1";
  b += fmt::format("    const {} xb = ({})img * {} + ({})m * {};\n", idx, idx, dim_text(syms, dim_mul(G.C, G.in_size)),
                   idx, cstride);
  b += fmt::format("    {} acc = 0;\n", ct);
  std::string ind = "    ";
  for (int d = 0; d < nd; ++d) {
    b += fmt::format("{}for (int t{} = 0; t{} < {}; ++t{}) {{\n", ind, d, d, G.k[d], d);
    ind += "  ";
    b += fmt::format("{}const int x{} = o{} * {} - {} + t{} * {};\n", ind, d, d, G.strides[d], G.pads[d], d,
                     G.dilations[d]);
    b += fmt::format("{}if ((unsigned)x{} >= {}) continue;\n", ind, d, unsigned_bound(syms, G.in[d]));
  }
  std::string pos, tap;
  const std::vector<int64_t> kstr = strides_of(G.k);
  for (int d = 0; d < nd; ++d) {
    pos += fmt::format("{}({})x{} * {}", d ? " + " : "", idx, d, dim_text(syms, istr[d]));
    tap += fmt::format("{}t{} * {}", d ? " + " : "", d, kstr[d]);
  }
  b += fmt::format("{}acc += {} * {};\n", ind, cuda_load(dt, fmt::format("in{}[xb + ({}) * {}]", sx, pos, pstride)),
                   cuda_load(dt, fmt::format("in{}[m * {} + {}]", sw, G.k_size, tap)));
  for (int d = nd - 1; d >= 0; --d) {
    ind.resize(ind.size() - 2);
    b += ind + "}\n";
  }
  if (sbias >= 0) b += fmt::format("    acc += {};\n", cuda_load(dt, fmt::format("in{}[m]", sbias)));
  b += store;
  b += "  }\n}\n";
  b += ep.sim_entry("@NAME@", false, false, generic);
  k.name = fmt::format("kiln_dwconv_{:016x}", XXH64(b.data(), b.size(), 0));
  std::string named;
  for (size_t p = 0;;) {
    size_t a = b.find("@NAME@", p);
    named.append(b, p, a == std::string::npos ? std::string::npos : a - p);
    if (a == std::string::npos) break;
    named += k.name;
    p = a + 6;
  }
  k.source = std::string(kKernelPrelude) + ep.fp_includes() + std::string(expr_prelude()) + named;
  return k;
}

}  // namespace

std::vector<ComputeKernel> emit_conv(const Epilogue& ep) {
  const Node& n = ep.anchor();
  const std::string& op = n.op();
  const bool transpose = op == "conv_transpose";
  const bool ci = op == "conv_integer", qc = op == "qlinear_conv";
  if (op != "conv" && !transpose && !ci && !qc)
    unsupported("codegen: {} is not conv, conv_transpose, conv_integer or qlinear_conv", n.describe());
  const bool nhwc = !transpose && n.attrs().get_string("layout", "nchw") == "nhwc";
  const int iw = qc ? 3 : 1;
  const TensorType& xt = n.input(0)->type();
  const TensorType& wt = n.input(iw)->type();
  const DType dt = xt.dtype;
  if (!is_float(dt) && !ci && !qc) unsupported("codegen: {}: {} operands", n.describe(), dtype_name(dt));
  // Zero points of the quantized convs: x's per tensor, w's per tensor or per output channel.
  const int sxzp = ci || qc ? ep.anchor_slot(2) : -1, swzp = ci ? ep.anchor_slot(3) : qc ? ep.anchor_slot(5) : -1;
  const bool wzp_per_m = swzp >= 0 && n.input(ci ? 3 : 5)->type().numel() > 1;
  auto with_zp = [=](const std::string& stored, int zslot, const std::string& m) {
    if (zslot < 0) return gemm_load_as(dt, stored);
    return fmt::format("(unsigned long long)((long long){} - (long long)in{}[{}])", stored, zslot, m);
  };
  const Shape xs = nhwc ? permute_dims(xt.shape, channels_first_perm(xt.rank())) : xt.shape;
  const Shape ws = nhwc ? permute_dims(wt.shape, channels_first_perm(wt.rank())) : wt.shape;
  const Shape& yt = n.output(0)->shape();
  const Shape ys = nhwc ? permute_dims(yt, channels_first_perm(static_cast<int>(yt.size()))) : yt;
  const ConvGeom G = geometry(n, xs, ws, ys, transpose);
  if (!transpose && !ci && !qc && G.Cg == 1 && G.Mg == 1 && G.group > 1) return {emit_depthwise(ep, G, nhwc)};
  const int nd = G.nd;
  const char* idx = ep.index_type();
  const int sx = ep.anchor_slot(0), sw = ep.anchor_slot(iw), sbias = ep.anchor_slot(qc ? 8 : ci ? -1 : 2);
  TiledGemm g;
  g.dtype = dt;
  g.label = transpose ? "conv_transpose" : nhwc ? "conv_nhwc" : "conv";
  g.K = G.Cg * G.k_size;
  g.tf32 = n.attrs().get_int("tf32", 0) != 0;
  for (int slot : {sx, sw, sxzp, swzp})
    if (slot >= 0) g.operand_slots.push_back(slot);
  // Shape-generic: a symbolic batch of images (NCHW: the GEMM batch; nhwc:
  // M) and image size (NCHW: N; nhwc: M), sizes from `ks`; the epilogue's
  // symbols, so its code and the loaders read the same slots.
  g.syms = ep.symbols();
  const bool generic = !g.syms.empty();
  const KernelSymbols sy = g.syms;
  const std::vector<int64_t> istr = generic ? symbolic_strides(G.in) : strides_of(G.in);
  g.operand_bytes = generic ? 0 : static_cast<int64_t>(xt.nbytes() + wt.nbytes());
  // Elements per 16-byte chunk: the cp.async path of the tensor-core kernel,
  // the 128-bit loads of the SIMT kernel at f32.
  const int64_t W = 16 / static_cast<int64_t>(dtype_size(dt));
  const bool chunks = (gemm_math(g) != GemmMath::Simt || dt == DType::F32) && !ci && !qc;
  const std::string ind = "      ";
  auto tap_coords = [&](const std::string& kp, const std::string& s, std::string& b) {
    split_index(kp, G.k, s + "_t", "        ", b);
  };
  std::string bias_m;  // the output channel of the tile element, for the bias
  if (!nhwc) {
    // Per (image, group): rows = output channels of the group, columns = output positions.
    g.batch = dim_mul(G.N, G.group);
    g.M = G.Mg;
    g.N = G.out_size;
    g.prologue = fmt::format("  const int img = bz / {}, grp = bz % {};\n", G.group, G.group);
    const ConvGeom c = G;
    if (!transpose) {
      g.a.k_fast = true;
      g.a.setup = [=](const std::string& row, const std::string& s, std::string& b) {
        b += fmt::format("  const {} {}_base = (({})grp * {} + {}) * {};\n", idx, s, idx, c.Mg, row, c.Cg * c.k_size);
      };
      g.a.load = [=](const std::string& k, const std::string& s) {
        return fmt::format("        v = {};\n", with_zp(fmt::format("in{}[{}_base + {}]", sw, s, k), swzp,
                                                        wzp_per_m ? fmt::format("grp * {} + {}_row", c.Mg, s) : "0"));
      };
      if (chunks && g.K % W == 0) {  // weight rows of K elements
        g.a.chunk_buffer = fmt::format("in{}", sw);
        g.a.chunk = [=](const std::string& k, const std::string& s) {
          return fmt::format("        ok = true;\n        off = {}_base + {};\n", s, k);
        };
      }
      g.b.k_fast = false;
      g.b.setup = [=](const std::string& row, const std::string& s, std::string& b) {
        split_index(row, c.out, s + "_o", "  ", b, sy);
        for (int d = 0; d < nd; ++d)
          b += fmt::format("  const int {}_i{} = {}_o{} * {} - {};\n", s, d, s, d, c.strides[d], c.pads[d]);
        b += fmt::format("  const {} {}_base = (({})img * {} + ({})grp * {}) * {};\n", idx, s, idx, c.C, idx, c.Cg,
                         dim_text(sy, c.in_size));
      };
      g.b.load = [=](const std::string& k, const std::string& s) {
        std::string b;
        b += fmt::format("        const int ch = {} / {}, kp = {} % {};\n", k, c.k_size, k, c.k_size);
        tap_coords("kp", s, b);
        std::string ok, off = fmt::format("{}_base + ({})ch * {}", s, idx, dim_text(sy, c.in_size));
        for (int d = 0; d < nd; ++d) {
          b += fmt::format("        const int x{} = {}_i{} + {}_t{} * {};\n", d, s, d, s, d, c.dilations[d]);
          ok += fmt::format("{}(unsigned)x{} < {}", d ? " && " : "", d, unsigned_bound(sy, c.in[d]));
          off += fmt::format(" + ({})x{} * {}", idx, d, dim_text(sy, istr[d]));
        }
        b += fmt::format("        if ({}) v = {};\n", ok, with_zp(fmt::format("in{}[{}]", sx, off), sxzp, "0"));
        return b;
      };
    } else {
      // w [C, Mg, k...]: A(m, (ch, kp)) = w[((grp * Cg + ch) * Mg + m) * taps + kp].
      g.a.k_fast = true;
      g.a.setup = [=](const std::string& row, const std::string& s, std::string& b) {
        b += fmt::format("  const {} {}_base = ({})grp * {} + ({}){} * {};\n", idx, s, idx, c.Cg * c.Mg * c.k_size, idx,
                         row, c.k_size);
      };
      g.a.load = [=](const std::string& k, const std::string& s) {
        return fmt::format(
            "        const int ch = {} / {}, kp = {} % {};\n        v = {};\n", k, c.k_size, k, c.k_size,
            gemm_load_as(dt, fmt::format("in{}[{}_base + ({})ch * {} + kp]", sw, s, idx, c.Mg * c.k_size)));
      };
      g.b.k_fast = false;
      g.b.setup = [=](const std::string& row, const std::string& s, std::string& b) {
        split_index(row, c.out, s + "_o", "  ", b, sy);
        for (int d = 0; d < nd; ++d) b += fmt::format("  const int {}_q{} = {}_o{} + {};\n", s, d, s, d, c.pads[d]);
        b += fmt::format("  const {} {}_base = (({})img * {} + ({})grp * {}) * {};\n", idx, s, idx, c.C, idx, c.Cg,
                         dim_text(sy, c.in_size));
      };
      g.b.load = [=](const std::string& k, const std::string& s) {
        std::string b;
        b += fmt::format("        const int ch = {} / {}, kp = {} % {};\n", k, c.k_size, k, c.k_size);
        tap_coords("kp", s, b);
        std::string ok, off = fmt::format("{}_base + ({})ch * {}", s, idx, dim_text(sy, c.in_size));
        for (int d = 0; d < nd; ++d) {
          // input position i with i * stride = o + pad - tap * dilation
          b += fmt::format("        const int u{} = {}_q{} - {}_t{} * {};\n", d, s, d, s, d, c.dilations[d]);
          b += fmt::format("        const int x{} = u{} / {};\n", d, d, c.strides[d]);
          ok += fmt::format("{}u{} >= 0 && u{} % {} == 0 && x{} < {}", d ? " && " : "", d, d, c.strides[d], d,
                            dim_text(sy, c.in[d]));
          off += fmt::format(" + ({})x{} * {}", idx, d, dim_text(sy, istr[d]));
        }
        b += fmt::format("        if ({}) v = {};\n", ok, gemm_load_as(dt, fmt::format("in{}[{}]", sx, off)));
        return b;
      };
    }
    g.store += fmt::format("{}const {} index = (({})img * {} + ({})grp * {} + gm) * {} + gn;\n", ind, idx, idx, G.M,
                           idx, G.Mg, dim_text(sy, G.out_size));
    g.vstore_row =
        fmt::format("(({})img * {} + ({})grp * {} + gm) * {}", idx, G.M, idx, G.Mg, dim_text(sy, G.out_size));
    // A symbolic N stores element by element (emit_gemm_mma.cpp): no alignment is claimed.
    g.vstore_align = is_symbolic_dim(G.out_size) ? 1 : G.out_size;
    bias_m = fmt::format("grp * {} + gm", G.Mg);
  } else {
    // Per group: rows = (image, output position), columns = output channels of the group.
    g.batch = G.group;
    g.M = dim_mul(G.N, G.out_size);
    g.N = G.Mg;
    g.prologue = "  const int grp = bz;\n";
    const ConvGeom c = G;
    g.a.k_fast = true;
    g.a.setup = [=](const std::string& row, const std::string& s, std::string& b) {
      b += fmt::format("  const int {}_img = {} / {};\n", s, row, dim_text(sy, c.out_size));
      b += fmt::format("  const int {}_pos = {} % {};\n", s, row, dim_text(sy, c.out_size));
      split_index(s + "_pos", c.out, s + "_o", "  ", b, sy);
      for (int d = 0; d < nd; ++d)
        b += fmt::format("  const int {}_i{} = {}_o{} * {} - {};\n", s, d, s, d, c.strides[d], c.pads[d]);
      b += fmt::format("  const {} {}_base = ({}){}_img * {} + ({})grp * {};\n", idx, s, idx, s,
                       dim_text(sy, dim_mul(c.in_size, c.C)), idx, c.Cg);
    };
    g.a.load = [=](const std::string& k, const std::string& s) {
      std::string b;
      b += fmt::format("        const int kp = {} / {}, ch = {} % {};\n", k, c.Cg, k, c.Cg);
      tap_coords("kp", s, b);
      std::string ok, pos;
      for (int d = 0; d < nd; ++d) {
        b += fmt::format("        const int x{} = {}_i{} + {}_t{} * {};\n", d, s, d, s, d, c.dilations[d]);
        ok += fmt::format("{}(unsigned)x{} < {}", d ? " && " : "", d, unsigned_bound(sy, c.in[d]));
        pos += fmt::format("{}({})x{} * {}", d ? " + " : "", idx, d, dim_text(sy, istr[d]));
      }
      b += fmt::format("        if ({}) v = {};\n", ok,
                       gemm_load_as(dt, fmt::format("in{}[{}_base + ({}) * {} + ch]", sx, s, pos, c.C)));
      return b;
    };
    if (chunks && c.Cg % W == 0) {
      // A chunk of W channels lies inside one tap: contiguous in x, aligned (C, grp * Cg multiples of W).
      g.a.chunk_buffer = fmt::format("in{}", sx);
      g.a.chunk = [=](const std::string& k, const std::string& s) {
        std::string b;
        b += fmt::format("        const int kp = {} / {}, ch = {} % {};\n", k, c.Cg, k, c.Cg);
        tap_coords("kp", s, b);
        std::string ok, pos;
        for (int d = 0; d < nd; ++d) {
          b += fmt::format("        const int x{} = {}_i{} + {}_t{} * {};\n", d, s, d, s, d, c.dilations[d]);
          ok += fmt::format("{}(unsigned)x{} < {}", d ? " && " : "", d, unsigned_bound(sy, c.in[d]));
          pos += fmt::format("{}({})x{} * {}", d ? " + " : "", idx, d, dim_text(sy, istr[d]));
        }
        b += fmt::format("        ok = {};\n        off = {}_base + ({}) * {} + ch;\n", ok, s, pos, c.C);
        return b;
      };
    }
    // w [M, k..., Cg]: B(k, m) = w[(grp * Mg + m) * K + k].
    g.b.k_fast = true;
    g.b.setup = [=](const std::string& row, const std::string& s, std::string& b) {
      b += fmt::format("  const {} {}_base = (({})grp * {} + {}) * {};\n", idx, s, idx, c.Mg, row, c.Cg * c.k_size);
    };
    g.b.load = [=](const std::string& k, const std::string& s) {
      return fmt::format("        v = {};\n", gemm_load_as(dt, fmt::format("in{}[{}_base + {}]", sw, s, k)));
    };
    if (chunks && g.K % W == 0) {  // weight rows of K elements
      g.b.chunk_buffer = fmt::format("in{}", sw);
      g.b.chunk = [=](const std::string& k, const std::string& s) {
        return fmt::format("        ok = true;\n        off = {}_base + {};\n", s, k);
      };
    }
    g.store += fmt::format("{}const {} index = ({})gm * {} + grp * {} + gn;\n", ind, idx, idx, G.M, G.Mg);
    g.vstore_row = fmt::format("({})gm * {} + grp * {}", idx, G.M, G.Mg);
    g.vstore_align = std::gcd(G.M, G.Mg);
    bias_m = fmt::format("grp * {} + gn", G.Mg);
  }
  // Every 32-bit extent at its largest: the output positions (NCHW: the
  // GEMM's columns) or images x positions (nhwc: its rows), the reduction.
  {
    const SymbolBindings at = largest_symbols(ep.node());
    std::vector<int64_t> positions(G.out.begin(), G.out.end());
    if (nhwc) positions.insert(positions.begin(), G.N);
    check_32bit_extent(n, nhwc ? "rows (images x output positions)" : "columns (output positions)", positions, at);
    check_32bit_extent(n, "reduction (input channels per group x kernel taps)", {G.Cg, G.k_size}, at);
  }
  const std::string ct = gemm_compute_type(dt);
  if (qc) {
    // As the reference: (acc + B[m]) as int32, multiplier x_scale * w_scale[m] / y_scale in float, then
    // rint(a * multiplier + y_zero_point) in double, saturated (NaN -> 0).
    const DType yt = n.output(0)->dtype();
    const std::string lo = yt == DType::U8 ? "0.0" : "-128.0", hi = yt == DType::U8 ? "255.0" : "127.0";
    g.store += fmt::format("{}const int m = {};\n", ind, bias_m);
    g.store += fmt::format("{}const int a = (int)(unsigned)(acc{});\n", ind,
                           sbias >= 0 ? fmt::format(" + (unsigned long long)(long long)in{}[m]", sbias) : "");
    g.store += fmt::format("{}const float mult = in{}[0] * in{}[{}] / in{}[0];\n", ind, ep.anchor_slot(1),
                           ep.anchor_slot(4), n.input(4)->type().numel() > 1 ? "m" : "0", ep.anchor_slot(6));
    g.store += fmt::format("{}double q = rint((double)a * (double)mult + (double)in{}[0]);\n", ind, ep.anchor_slot(7));
    g.store += fmt::format("{}q = q != q ? 0.0 : q < {} ? {} : q > {} ? {} : q;\n", ind, lo, lo, hi, hi);
    g.store += ep.code("(long long)q", "index", ind);
    g.vstore_row.clear();
  } else {
    if (sbias >= 0)
      g.store += fmt::format("{}const {} r = acc + {};\n", ind, ct,
                             cuda_load(n.input(2)->dtype(), fmt::format("in{}[{}]", sbias, bias_m)));
    else g.store += fmt::format("{}const {} r = acc;\n", ind, ct);
    g.store += ep.code(gemm_acc_for_epilogue(dt, "r"), "index", ind);
    // The vectorized store: a bias along the row (per output channel, nhwc) is read as one vector.
    if (!is_float(dt) || ci) {
      g.vstore_row.clear();
    } else if (sbias >= 0 && bias_m.ends_with("gn")) {
      g.vstore_pre = vector_load_statements("e_bias", n.input(2)->dtype(), fmt::format("in{}", sbias),
                                            fmt::format("grp * {} + gn0", G.Mg), "@V@", ind);
      g.vstore_finish = fmt::format("{}const {} r = acc + {};\n", ind, ct, cuda_load(n.input(2)->dtype(), "e_bias[j]"));
    } else if (sbias >= 0) {
      g.vstore_finish = fmt::format("{}const {} r = acc + {};\n", ind, ct,
                                    cuda_load(n.input(2)->dtype(), fmt::format("in{}[{}]", sbias, bias_m)));
    } else {
      g.vstore_finish = fmt::format("{}const {} r = acc;\n", ind, ct);
    }
    g.vstore_value = gemm_acc_for_epilogue(dt, "r");
  }
  return emit_tiled_gemm(g, ep);
}

}  // namespace kiln::codegen
