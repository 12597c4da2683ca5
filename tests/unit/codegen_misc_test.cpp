// The data-movement and sampling emitters against the reference: the index
// maps added to emit_injective (gather_elements, gather_nd, trilu,
// reverse_sequence), emit_index_select (one_hot, eye_like, compress), emit_scatter (scatter_elements,
// scatter_nd, every reduction, duplicate indices), emit_resize (every mode,
// coordinate transform and nearest_mode, cubic exclude_outside, antialias,
// tf_crop_and_resize, 3-D), emit_sample (grid_sample 1-D..3-D, roi_align)
// and emit_conv_gather (col2im, deform_conv), on odd shapes, size-1 dims and
// results larger than one block, for f32/f16/f64 and integer/bool dtypes.
// Every kernel must compile with NVRTC for sm_80 and sm_90 without spills or warnings;
// on the simulator, index/scatter/nearest/col2im results must equal
// evaluate_op's bit for bit, interpolations within the float tolerance.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "codegen/emitters/gemm_conv/emit_conv_gather.h"
#include "codegen/emitters/data_movement/emit_index_select.h"
#include "codegen/emitters/data_movement/emit_injective.h"
#include "codegen/emitters/data_movement/emit_resize.h"
#include "codegen/emitters/data_movement/emit_sample.h"
#include "codegen/emitters/data_movement/emit_scatter.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_module.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/registry.h"

namespace kiln {
namespace {

using I = std::vector<int64_t>;
using F = std::vector<float>;

AttrMap attrs(std::initializer_list<std::pair<const char*, Attribute>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

// Floats uniform in [lo, hi) (f16/bf16 rounded on store), integers in [lo, hi].
Tensor rand_tensor(DType t, Shape s, uint64_t seed, double lo = -2, double hi = 2) {
  Tensor x(TensorType(t, std::move(s)));
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double u = static_cast<double>(rng() >> 11) / 9007199254740992.0;
    if (is_float(t)) x.set_double(i, lo + (hi - lo) * u);
    else if (t == DType::Bool) x.set_double(i, rng() % 2);
    else x.set_double(i, std::floor(lo + (hi - lo + 1) * u));
  }
  return x;
}

Tensor ints(DType t, Shape s, const I& v) {
  Tensor x(TensorType(t, std::move(s)));
  for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, static_cast<double>(v.at(i)));
  return x;
}

struct Case {
  std::string label;
  std::string op;
  AttrMap attrs;
  std::vector<Tensor> ins;
  bool exact = true;  // bit for bit; else within the float tolerance
  // Filled by emit():
  std::vector<TensorType> outs;
  std::string name, source;
  unsigned grid = 0, block = 0;
  std::vector<Tensor> extra;
};

void emit(Case& c) {
  const OpDef& def = op_registry().get(c.op);
  Graph g;
  std::vector<Value*> vals;
  std::vector<TensorType> types;
  for (size_t i = 0; i < c.ins.size(); ++i) {
    vals.push_back(g.add_constant(fmt::format("in{}", i), c.ins[i]));
    types.push_back(c.ins[i].type());
  }
  InferContext ic(def.name, vals, c.attrs, 1, "node");
  c.outs = infer_types(def, ic);
  auto take = [&](const codegen::OneLaunchKernel& k) {
    c.name = k.name;
    c.source = k.source;
    c.grid = k.grid;
    c.block = k.block;
  };
  if (codegen::injective_supported(c.op)) {
    codegen::InjectiveKernel k = codegen::emit_injective_op(def, c.attrs, types, c.outs);
    c.name = k.name;
    c.source = k.source;
    c.grid = k.grid;
    c.block = k.block;
  } else if (codegen::index_select_supported(c.op)) {
    take(codegen::emit_index_select_op(c.op, c.attrs, types, c.outs[0]));
  } else if (codegen::scatter_supported(c.op)) {
    take(codegen::emit_scatter_op(def, c.attrs, types, c.outs[0]));
  } else if (c.op == "resize") {
    codegen::ResizeKernel k = codegen::emit_resize_op(c.attrs, types[0], c.outs[0]);
    take(k.kernel);
    c.extra = k.tables;
  } else if (codegen::sample_supported(c.op)) {
    take(codegen::emit_sample_op(c.op, c.attrs, types, c.outs[0]));
  } else {
    take(codegen::emit_conv_gather_op(c.op, c.attrs, types, c.outs[0]));
  }
}

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](std::string label, std::string op, AttrMap a, std::vector<Tensor> ins, bool exact = true) {
    v.push_back(Case{std::move(label), std::move(op), std::move(a), std::move(ins), exact, {}, {}, {}, 0, 0, {}});
  };
  uint64_t seed = 1;
  const DType kData[] = {DType::F16, DType::I64};
  // ---- index maps ----
  for (DType dt : kData) {
    const std::string d(dtype_name(dt));
    add("gather_elements axis=1 i64 " + d, "gather_elements", attrs({{"axis", int64_t{1}}}),
        {rand_tensor(dt, {3, 7, 5}, ++seed), rand_tensor(DType::I64, {3, 11, 4}, ++seed, -7, 6)});
    add("gather_elements axis=-1 i32 " + d, "gather_elements", attrs({{"axis", int64_t{-1}}}),
        {rand_tensor(dt, {2, 300}, ++seed), rand_tensor(DType::I32, {1, 310}, ++seed, -300, 299)});
    add("gather_nd m=2 " + d, "gather_nd", attrs({}),
        {rand_tensor(dt, {4, 5, 33}, ++seed), rand_tensor(DType::I64, {3, 2, 2}, ++seed, -4, 3)});
    add("gather_nd batch_dims=1 m=2 " + d, "gather_nd", attrs({{"batch_dims", int64_t{1}}}),
        {rand_tensor(dt, {3, 4, 5, 6}, ++seed), rand_tensor(DType::I32, {3, 7, 2}, ++seed, -4, 3)});
    add("gather_nd full tuples " + d, "gather_nd", attrs({}),
        {rand_tensor(dt, {2, 3}, ++seed), ints(DType::I64, {4, 2}, {0, 0, 1, 2, -1, -1, 0, -3})});
    add("trilu upper k=0 " + d, "trilu", attrs({}), {rand_tensor(dt, {2, 5, 7}, ++seed)});
    add("trilu lower k=-1 " + d, "trilu", attrs({{"upper", int64_t{0}}, {"k", int64_t{-1}}}),
        {rand_tensor(dt, {3, 1, 9, 40}, ++seed)});
    add("trilu upper k=9 " + d, "trilu", attrs({{"k", int64_t{9}}}), {rand_tensor(dt, {4, 6}, ++seed)});
    add("trilu lower k=-7 " + d, "trilu", attrs({{"upper", int64_t{0}}, {"k", int64_t{-7}}}),
        {rand_tensor(dt, {5, 3}, ++seed)});
    add("eye_like k=0 " + d, "eye_like", attrs({}), {rand_tensor(dt, {5, 70}, ++seed)});
    add("eye_like k=-2 to i32 " + d, "eye_like", attrs({{"k", int64_t{-2}}, {"dtype", std::string("i32")}}),
        {rand_tensor(dt, {6, 4}, ++seed)});
    add("reverse_sequence t=0 b=1 " + d, "reverse_sequence", attrs({}),
        {rand_tensor(dt, {5, 4, 3}, ++seed), ints(DType::I64, {4}, {5, 0, 1, 3})});
    add("reverse_sequence b=0 t=1 " + d, "reverse_sequence",
        attrs({{"batch_axis", int64_t{0}}, {"time_axis", int64_t{1}}}),
        {rand_tensor(dt, {3, 70, 2}, ++seed), ints(DType::I32, {3}, {70, 2, 37})});
    add("compress axis=1 " + d, "compress", attrs({{"axis", int64_t{1}}}),
        {rand_tensor(dt, {3, 6, 25}, ++seed), ints(DType::Bool, {5}, {1, 0, 1, 1, 0})});
    add("compress flat " + d, "compress", attrs({}),
        {rand_tensor(dt, {4, 90}, ++seed), rand_tensor(DType::Bool, {300}, ++seed)});
  }
  for (DType vdt : {DType::F32, DType::I32}) {
    add(fmt::format("one_hot axis=-1 i64 idx {}", dtype_name(vdt)), "one_hot", attrs({{"depth", int64_t{11}}}),
        {rand_tensor(DType::I64, {3, 40}, ++seed, -13, 12), ints(vdt, {2}, {3, 7})});
    add(fmt::format("one_hot axis=0 f32 idx {}", dtype_name(vdt)), "one_hot",
        attrs({{"depth", int64_t{5}}, {"axis", int64_t{0}}}),
        {rand_tensor(DType::F32, {4, 3}, ++seed, -6.5, 6.5), ints(vdt, {2}, {0, 1})});
    add(fmt::format("one_hot axis=1 i32 idx {}", dtype_name(vdt)), "one_hot",
        attrs({{"depth", int64_t{3}}, {"axis", int64_t{1}}}),
        {rand_tensor(DType::I32, {2, 5}, ++seed, -4, 4), ints(vdt, {2}, {-1, 2})});
  }
  // ---- scatter ----
  // Every reduction for f32 and i32; f16 and bool (float rounding per update, or/and) add and mul.
  for (DType dt : {DType::F32, DType::I32, DType::F16, DType::Bool}) {
    const std::string d(dtype_name(dt));
    const bool all = dt == DType::F32 || dt == DType::I32;
    for (const char* red : {"none", "add", "mul", "max", "min"}) {
      if (!all && std::string(red) != "add" && std::string(red) != "mul") continue;
      // Many duplicates: 9 updates per row into 4 positions.
      add(fmt::format("scatter_elements axis=1 {} {}", red, d), "scatter_elements",
          attrs({{"axis", int64_t{1}}, {"reduction", std::string(red)}}),
          {rand_tensor(dt, {3, 4, 5}, ++seed, -3, 3), rand_tensor(DType::I64, {2, 9, 5}, ++seed, -4, 3),
           rand_tensor(dt, {2, 9, 5}, ++seed, -3, 3)});
      if (all)
        add(fmt::format("scatter_nd k=1 {} {}", red, d), "scatter_nd", attrs({{"reduction", std::string(red)}}),
            {rand_tensor(dt, {6, 70}, ++seed, -3, 3), rand_tensor(DType::I32, {9, 1}, ++seed, -6, 5),
             rand_tensor(dt, {9, 70}, ++seed, -3, 3)});
    }
    if (!all) continue;
    add("scatter_elements axis=0 none " + d, "scatter_elements", attrs({}),
        {rand_tensor(dt, {300, 2}, ++seed), rand_tensor(DType::I32, {290, 1}, ++seed, -300, 299),
         rand_tensor(dt, {290, 1}, ++seed)});
    add("scatter_nd k=3 add " + d, "scatter_nd", attrs({{"reduction", std::string("add")}}),
        {rand_tensor(dt, {2, 3, 4}, ++seed, -3, 3), ints(DType::I64, {2, 2, 3}, {0, 1, 2, 1, 2, 3, 0, 1, 2, -1, 0, -4}),
         rand_tensor(dt, {2, 2}, ++seed, -3, 3)});
  }
  // ---- resize ----
  auto rs = [&](std::string label, DType dt, Shape in, AttrMap a, bool exact) {
    add("resize " + label + " " + std::string(dtype_name(dt)), "resize", std::move(a),
        {rand_tensor(dt, std::move(in), ++seed)}, exact);
  };
  for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"})
    for (const char* ct : {"half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn"})
      if (std::string(ct) == "half_pixel" || std::string(nm) == "round_prefer_floor")
        rs(fmt::format("nearest {} {}", nm, ct), DType::I64, {1, 2, 5, 7},
           attrs({{"sizes", I{1, 2, 9, 4}},
                  {"mode", std::string("nearest")},
                  {"nearest_mode", std::string(nm)},
                  {"coordinate_transformation_mode", std::string(ct)}}),
           true);
  rs("nearest scales 3x", DType::F16, {1, 3, 4, 5},
     attrs({{"sizes", I{1, 3, 12, 15}}, {"scales", F{1, 1, 3, 3}}, {"mode", std::string("nearest")}}), true);
  // f32: everything; f16 (rounding through float): cubic and trilinear.
  for (DType dt : {DType::F32, DType::F16}) {
    if (dt == DType::F16) {
      rs("cubic exclude_outside", dt, {1, 2, 6, 5},
         attrs({{"sizes", I{1, 2, 11, 3}}, {"mode", std::string("cubic")}, {"exclude_outside", int64_t{1}}}), false);
      rs("trilinear 3-D", dt, {1, 3, 4, 5, 6}, attrs({{"sizes", I{1, 3, 7, 3, 9}}, {"mode", std::string("linear")}}),
         false);
      continue;
    }
    for (const char* ct : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"})
      rs(fmt::format("linear {}", ct), dt, {2, 3, 5, 4},
         attrs({{"sizes", I{2, 3, 8, 7}},
                {"mode", std::string("linear")},
                {"coordinate_transformation_mode", std::string(ct)}}),
         false);
    rs("linear downscale", dt, {1, 1, 9, 10},
       attrs({{"sizes", I{1, 1, 4, 3}}, {"scales", F{1, 1, 0.5f, 0.3f}}, {"mode", std::string("linear")}}), false);
    rs("linear antialias", dt, {1, 2, 12, 9},
       attrs({{"sizes", I{1, 2, 5, 4}}, {"mode", std::string("linear")}, {"antialias", int64_t{1}}}), false);
    rs("cubic a=-0.5 exclude_outside", dt, {1, 2, 6, 5},
       attrs({{"sizes", I{1, 2, 11, 3}},
              {"mode", std::string("cubic")},
              {"cubic_coeff_a", -0.5f},
              {"exclude_outside", int64_t{1}}}),
       false);
    rs("cubic antialias", dt, {1, 1, 16, 16},
       attrs({{"sizes", I{1, 1, 7, 5}}, {"mode", std::string("cubic")}, {"antialias", int64_t{1}}}), false);
    rs("linear tf_crop_and_resize", dt, {1, 1, 6, 7},
       attrs({{"sizes", I{1, 1, 5, 9}},
              {"mode", std::string("linear")},
              {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
              {"roi", F{0, 0, -0.2f, 0.3f, 1, 1, 0.8f, 1.4f}},
              {"extrapolation_value", 2.5f}}),
       false);
    rs("trilinear 3-D", dt, {1, 3, 4, 5, 6}, attrs({{"sizes", I{1, 3, 7, 3, 9}}, {"mode", std::string("linear")}}),
       false);
    rs("linear 1-D", dt, {300}, attrs({{"sizes", I{517}}, {"mode", std::string("linear")}}), false);
  }
  rs("nearest tf_crop_and_resize", DType::I32, {2, 6, 7},
     attrs({{"sizes", I{2, 5, 9}},
            {"mode", std::string("nearest")},
            {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
            {"roi", F{0, -0.2f, 0.3f, 1, 0.8f, 1.4f}},
            {"extrapolation_value", 7.0f}}),
     true);
  // ---- grid_sample ----
  for (DType dt : {DType::F32, DType::F16}) {
    for (const char* mode : {"linear", "nearest", "cubic"})
      for (const char* pad : {"zeros", "border", "reflection"})
        for (int64_t ac : {0, 1})
          if (dt == DType::F32 || (ac == 0 && std::string(pad) == "zeros"))
            add(fmt::format("grid_sample 2-D {} {} align={} {}", mode, pad, ac, dtype_name(dt)), "grid_sample",
                attrs({{"mode", std::string(mode)}, {"padding_mode", std::string(pad)}, {"align_corners", ac}}),
                {rand_tensor(dt, {2, 3, 5, 6}, ++seed), rand_tensor(dt, {2, 7, 9, 2}, ++seed, -1.6, 1.6)}, false);
    if (dt == DType::F16) continue;
    add(fmt::format("grid_sample 3-D linear reflection {}", dtype_name(dt)), "grid_sample",
        attrs({{"padding_mode", std::string("reflection")}}),
        {rand_tensor(dt, {1, 2, 3, 4, 5}, ++seed), rand_tensor(dt, {1, 4, 3, 6, 3}, ++seed, -1.4, 1.4)}, false);
    add(fmt::format("grid_sample 1-D nearest border {}", dtype_name(dt)), "grid_sample",
        attrs({{"mode", std::string("nearest")}, {"padding_mode", std::string("border")}}),
        {rand_tensor(dt, {2, 2, 9}, ++seed), rand_tensor(dt, {2, 300, 1}, ++seed, -1.4, 1.4)}, false);
  }
  // ---- roi_align ----
  for (DType dt : {DType::F32, DType::F16})
    for (const char* mode : {"avg", "max"})
      for (const char* ct : {"half_pixel", "output_half_pixel"})
        for (int64_t sr : {0, 2}) {
          if (dt == DType::F16 && (sr == 2 || std::string(ct) == "half_pixel")) continue;
          Tensor rois(TensorType(dt, {4, 4}));
          const double rv[] = {0, 0, 9, 9, 1.5, 2.2, 4.1, 8.3, -3, 2, 12, 5, 6, 6, 6.5, 6.2};
          for (int i = 0; i < 16; ++i) rois.set_double(i, rv[i]);
          add(fmt::format("roi_align {} {} sr={} {}", mode, ct, sr, dtype_name(dt)), "roi_align",
              attrs({{"mode", std::string(mode)},
                     {"coordinate_transformation_mode", std::string(ct)},
                     {"output_height", int64_t{3}},
                     {"output_width", int64_t{4}},
                     {"sampling_ratio", sr},
                     {"spatial_scale", 0.75f}}),
              {rand_tensor(dt, {2, 3, 8, 10}, ++seed), rois, ints(DType::I64, {4}, {0, 1, 1, 0})}, false);
        }
  // ---- col2im / deform_conv ----
  for (DType dt : {DType::F32, DType::F16, DType::I32}) {
    add(fmt::format("col2im 2-D stride/dil/pads {}", dtype_name(dt)), "col2im",
        attrs({{"image_shape", I{7, 6}},
               {"block_shape", I{2, 3}},
               {"strides", I{2, 1}},
               {"dilations", I{2, 1}},
               {"pads", I{1, 0, 2, 1}}}),
        {rand_tensor(dt, {2, 12, 20}, ++seed, -3, 3)}, true);
    add(fmt::format("col2im 1-D {}", dtype_name(dt)), "col2im",
        attrs({{"image_shape", I{300}},
               {"block_shape", I{3}},
               {"strides", I{1}},
               {"dilations", I{1}},
               {"pads", I{1, 1}}}),
        {rand_tensor(dt, {1, 3, 300}, ++seed, -3, 3)}, true);
  }
  for (DType dt : {DType::F32, DType::F64}) {
    AttrMap a = attrs({{"strides", I{1, 2}},
                       {"dilations", I{1, 1}},
                       {"pads", I{1, 1, 1, 0}},
                       {"group", int64_t{2}},
                       {"offset_group", int64_t{2}}});
    // x [1,4,6,7], w [6,2,3,2] -> out [1,6,6,4]; offset [1,2*2*6,6,4], mask [1,2*6,6,4].
    add(fmt::format("deform_conv bias+mask {}", dtype_name(dt)), "deform_conv", a,
        {rand_tensor(dt, {1, 4, 6, 7}, ++seed), rand_tensor(dt, {6, 2, 3, 2}, ++seed),
         rand_tensor(dt, {1, 24, 6, 4}, ++seed, -2.5, 2.5), rand_tensor(dt, {6}, ++seed),
         rand_tensor(dt, {1, 12, 6, 4}, ++seed, 0, 1)},
        false);
    if (dt == DType::F64) continue;
    add(fmt::format("deform_conv no bias {}", dtype_name(dt)), "deform_conv",
        attrs({{"strides", I{1, 1}}, {"dilations", I{2, 1}}, {"pads", I{0, 0, 0, 0}}}),
        {rand_tensor(dt, {2, 3, 7, 5}, ++seed), rand_tensor(dt, {4, 3, 2, 2}, ++seed),
         rand_tensor(dt, {2, 8, 5, 4}, ++seed, -1.5, 1.5)},
        false);
  }
  return v;
}

// Within tolerance: f32/f64 1e-5 abs + 1e-4 rel; f16/bf16 one or two ulps of
// the 11/8-bit mantissa (the reference rounds the same double through float).
bool close(double got, double want, DType t) {
  if (std::isnan(want)) return std::isnan(got);
  const double atol = t == DType::F16 ? 2e-3 : t == DType::BF16 ? 1.6e-2 : 1e-5;
  const double rtol = t == DType::F16 ? 2e-3 : t == DType::BF16 ? 1.6e-2 : 1e-4;
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

TEST(CodegenMisc, EveryKernelCompilesAndMatchesReferenceOnSim) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  std::vector<Case> cs = cases();
  std::vector<codegen::KernelSource> sources;
  std::map<std::string, int> per_op;
  for (Case& c : cs) {
    ASSERT_NO_THROW(emit(c)) << c.label;
    sources.push_back({c.name, c.source});
    ++per_op[c.op];
  }
  auto t1 = clock::now();
  codegen::KernelCache cache;
  int max_regs = 0, nvrtc_runs = 0;
  std::string max_regs_kernel;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks = compiler.compile(sources);
    nvrtc_runs += compiler.nvrtc_compilations();
    ASSERT_EQ(ks.size(), cs.size());
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty()) << cs[i].label;
      if (ks[i].registers > max_regs) {
        max_regs = ks[i].registers;
        max_regs_kernel = cs[i].label + " " + arch;
      }
      EXPECT_EQ(ks[i].spill_bytes, 0) << "spills: " << cs[i].label << " on " << arch;
      EXPECT_EQ(ks[i].log.find("warning"), std::string::npos) << cs[i].label << " on " << arch << ": " << ks[i].log;
    }
  }
  auto t2 = clock::now();
  codegen::SimCompiler sim;
  std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  auto t3 = clock::now();
  int ok = 0, bit_exact = 0;
  for (Case& c : cs) {
    const OpDef& def = op_registry().get(c.op);
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : c.ins) ptrs.push_back(&t);
    Tensor want = evaluate_op(def, c.attrs, ptrs, c.outs, "node")[0];
    Tensor got(c.outs[0]);
    std::memset(got.raw(), 0xa5, got.nbytes());
    std::vector<void*> bufs = {got.raw()};
    std::vector<long long> counts = {static_cast<long long>(got.numel())};
    for (Tensor& t : c.ins) {
      bufs.push_back(t.raw());
      counts.push_back(t.numel());
    }
    for (Tensor& t : c.extra) {
      bufs.push_back(t.raw());
      counts.push_back(t.numel());
    }
    ASSERT_GT(c.grid, 0u) << c.label;
    sim::LaunchConfig cfg;
    cfg.kernel = c.name;
    cfg.grid = dim3(c.grid);
    cfg.block = dim3(c.block);
    ASSERT_NO_THROW(codegen::sim_launch(entries.at(c.name), cfg, bufs, counts)) << c.label;
    ASSERT_EQ(got.nbytes(), want.nbytes()) << c.label;
    const bool same_bits = std::memcmp(got.raw(), want.raw(), got.nbytes()) == 0;
    bit_exact += same_bits;
    if (c.exact) {
      if (same_bits) ++ok;
      else ADD_FAILURE() << c.label << ": not bit-identical to the reference";
      continue;
    }
    int bad = 0;
    int64_t first = -1;
    for (int64_t i = 0; i < got.numel(); ++i)
      if (!close(got.get_double(i), want.get_double(i), got.dtype()) && bad++ == 0) first = i;
    if (bad)
      ADD_FAILURE() << c.label << ": " << bad << " of " << got.numel() << " differ, first " << first << ": "
                    << got.get_double(first) << " vs " << want.get_double(first);
    else ++ok;
  }
  auto t4 = clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::string ops;
  for (const auto& [op, n] : per_op) ops += fmt::format(" {}:{}", op, n);
  fmt::print(
      "codegen misc: {} kernels compiled for sm_80/sm_90 ({} NVRTC runs), max registers {} ({}), 0 spills "
      "expected; {} of {} match the reference ({} bit for bit)\n  per op:{}\n",
      cs.size(), nvrtc_runs, max_regs, max_regs_kernel, ok, cs.size(), bit_exact, ops);
  fmt::print("  times: emit {:.2f}s, nvrtc {:.2f}s, sim build {:.2f}s, run {:.2f}s\n", secs(t0, t1), secs(t1, t2),
             secs(t2, t3), secs(t3, t4));
  EXPECT_EQ(ok, static_cast<int>(cs.size()));
}

// Scatter with reduction none and duplicate indices: the last update in
// index order wins, on every run (the per-destination search is ordered).
TEST(CodegenMisc, ScatterDuplicatesLastWriteWins) {
  const OpDef& def = op_registry().get("scatter_elements");
  AttrMap a = attrs({{"axis", int64_t{0}}});
  Tensor data = ints(DType::F32, {3}, {10, 20, 30});
  Tensor idx = ints(DType::I64, {5}, {1, 1, -1, 1, 2});
  Tensor upd = ints(DType::F32, {5}, {1, 2, 3, 4, 5});
  codegen::OneLaunchKernel k = codegen::emit_scatter_op(def, a, {data.type(), idx.type(), upd.type()}, data.type());
  codegen::SimCompiler sim;
  auto entries = sim.compile({{k.name, k.source}});
  Tensor got(data.type());
  sim::LaunchConfig cfg;
  cfg.kernel = k.name;
  cfg.grid = dim3(k.grid);
  cfg.block = dim3(k.block);
  codegen::sim_launch(entries.at(k.name), cfg, {got.raw(), data.raw(), idx.raw(), upd.raw()}, {3, 3, 5, 5});
  EXPECT_EQ(got.data<float>()[0], 10.0f);
  EXPECT_EQ(got.data<float>()[1], 4.0f);
  EXPECT_EQ(got.data<float>()[2], 5.0f);
}

TEST(CodegenMisc, RejectsWhatItCannotEmit) {
  const OpDef& se = op_registry().get("scatter_elements");
  TensorType f(DType::F32, {4});
  EXPECT_THROW(
      codegen::emit_scatter_op(se, attrs({{"reduction", std::string("xor")}}), {f, TensorType(DType::I64, {4}), f}, f),
      Error);
  EXPECT_THROW(codegen::emit_scatter_op(se, {}, {f, TensorType(DType::F32, {4}), f}, f), Error);
  EXPECT_THROW(codegen::emit_sample_op("conv", {}, {f}, f), Error);
  EXPECT_THROW(codegen::emit_resize_op(attrs({{"sizes", I{3}}, {"mode", std::string("linear")}}),
                                       TensorType(DType::I32, {2}), TensorType(DType::I32, {3})),
               Error);
}

}  // namespace
}  // namespace kiln
