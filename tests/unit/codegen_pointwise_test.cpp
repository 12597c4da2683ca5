// The pointwise emitter against the reference: every Pointwise op of the
// registry, for each of f32/f16/bf16/i32/i64/bool its inference accepts,
// with broadcasting operands, is emitted once; every source must compile with
// NVRTC for sm_80 and sm_90, and run on the simulator on seeded random data
// with edge values (0, -0, NaN, +-inf, huge, tiny, ties) giving exactly the
// reference's output (bit for bit; any NaN matches any NaN).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "codegen/emitters/elementwise/emit_pointwise.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_module.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/low_bit.h"
#include "ops/registry.h"

namespace kiln {
namespace {

using codegen::PointwiseKernel;

struct Case {
  const OpDef* def;
  AttrMap attrs;
  std::string attrs_text;
  std::vector<TensorType> in;
  TensorType out;
  PointwiseKernel kernel;
};

std::optional<TensorType> try_infer(const OpDef& def, const std::vector<TensorType>& ins, const AttrMap& attrs) {
  Graph g;
  std::vector<Value*> vals;
  for (size_t i = 0; i < ins.size(); ++i) vals.push_back(g.add_input(fmt::format("in{}", i), ins[i]));
  InferContext ic(def.name, vals, attrs, 1, "node");
  try {
    return infer_types(def, ic)[0];
  } catch (const Error&) {
    return std::nullopt;
  }
}

const DType kLowBit[] = {DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ, DType::F8E8M0,
                         DType::F4E2M1,   DType::I4,         DType::U4,     DType::I2,         DType::U2};

// Attribute variants: the defaults, plus the values that change the Expr.
std::vector<std::pair<AttrMap, std::string>> attr_variants(const OpDef& def) {
  std::vector<std::pair<AttrMap, std::string>> v;
  if (def.name == "cast") {
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64, DType::I8, DType::U8,
                    DType::U64, DType::Bool}) {
      AttrMap a;
      a.set("to", std::string(dtype_name(t)));
      v.emplace_back(a, fmt::format("to={}", dtype_name(t)));
    }
    // The low-bit targets, float8 also without saturation, f8e8m0 in each
    // rounding mode: the reference's conversions (ir/low_bit_codec.cuh on the
    // host) against the same text compiled into the kernel.
    for (DType t : kLowBit) {
      AttrMap a;
      a.set("to", std::string(dtype_name(t)));
      v.emplace_back(a, fmt::format("to={}", dtype_name(t)));
      if (is_low_bit_float(t) && t != DType::F4E2M1) {
        a.set("saturate", int64_t{0});
        v.emplace_back(a, fmt::format("to={},saturate=0", dtype_name(t)));
      }
      if (t == DType::F8E8M0)
        for (const char* mode : {"down", "nearest"}) {
          AttrMap m;
          m.set("to", std::string(dtype_name(t)));
          m.set("round_mode", std::string(mode));
          v.emplace_back(m, fmt::format("to={},round_mode={}", dtype_name(t), mode));
        }
    }
    return v;
  }
  if (def.name == "bitcast") {  // every target; inference keeps those of the operand's bit width
    for (int i = 0; i < kNumDTypes; ++i) {
      AttrMap a;
      a.set("to", std::string(dtype_name(DType(i))));
      v.emplace_back(a, fmt::format("to={}", dtype_name(DType(i))));
    }
    return v;
  }
  if (def.name == "quantize_linear") {
    v.emplace_back(AttrMap{}, "");
    AttrMap a;
    a.set("saturate", int64_t{0});
    v.emplace_back(a, "saturate=0");
    AttrMap p;
    p.set("precision", std::string("f16"));
    v.emplace_back(p, "precision=f16");
    return v;
  }
  for (const AttrSpec& s : def.attrs)
    if (s.required) ADD_FAILURE() << def.name << ": required attribute '" << s.name << "' has no test value";
  v.emplace_back(AttrMap{}, "");
  auto has = [&](const char* n) {
    for (const AttrSpec& s : def.attrs)
      if (s.name == n) return true;
    return false;
  };
  if (has("approximate")) {
    AttrMap a;
    a.set("approximate", std::string("tanh"));
    v.emplace_back(a, "approximate=tanh");
  }
  if (has("detect_positive")) {
    for (int p = 0; p < 2; ++p) {
      AttrMap a;
      a.set("detect_positive", int64_t{p});
      a.set("detect_negative", int64_t{1 - p});
      v.emplace_back(a, fmt::format("detect_positive={}", p));
    }
  }
  if (has("alpha") && def.name != "celu") {
    AttrMap a;
    a.set("alpha", 0.3f);
    v.emplace_back(a, "alpha=0.3");
  }
  return v;
}

// Seeded data with edge values mixed in.
Tensor make_data(const TensorType& t, uint64_t seed) {
  Tensor x(t);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 3.0);
  static const double fedge[] = {0.0,     -0.0,  NAN,   INFINITY, -INFINITY, 1e30,      -1e30, 65504.0,
                                 70000.0, 1e-40, -1e-8, 0.5,      -0.5,      1.5,       -2.5,  1.0,
                                 -1.0,    2.0,   3e38,  1e-3,     0.9999999, -1.0000001};
  static const int64_t iedge[] = {0,
                                  1,
                                  -1,
                                  2,
                                  -2,
                                  7,
                                  63,
                                  64,
                                  65,
                                  127,
                                  128,
                                  255,
                                  256,
                                  32767,
                                  -32768,
                                  2147483647,
                                  -2147483648LL,
                                  INT64_MAX,
                                  INT64_MIN,
                                  4294967296LL};
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    // Every edge value once at the start (so each meets every value of the
    // other operands through broadcasting), then a quarter of the rest.
    const bool first = i < static_cast<int64_t>(std::size(fedge));
    const bool edge = first || rng() % 4 == 0;
    double fv = first ? fedge[(i + seed) % std::size(fedge)] : edge ? fedge[rng() % std::size(fedge)] : normal(rng);
    if (!edge && rng() % 3 == 0) fv = std::round(fv);  // integral values: ties, exact results
    int64_t iv = i < static_cast<int64_t>(std::size(iedge)) ? iedge[(i + seed) % std::size(iedge)]
                 : edge                                     ? iedge[rng() % std::size(iedge)]
                                                            : static_cast<int64_t>(rng() % 201) - 100;
    switch (t.dtype) {
      case DType::F32:
        x.data<float>()[i] = static_cast<float>(fv);
        break;
      case DType::F64:
        x.data<double>()[i] = fv;
        break;
      case DType::F16:
        x.data<uint16_t>()[i] = float_to_half(static_cast<float>(fv));
        break;
      case DType::BF16:
        x.data<uint16_t>()[i] = float_to_bf16(static_cast<float>(fv));
        break;
      case DType::I32:
        x.data<int32_t>()[i] = static_cast<int32_t>(iv);
        break;
      case DType::I64:
        x.data<int64_t>()[i] = iv;
        break;
      case DType::I8:
        x.data<int8_t>()[i] = static_cast<int8_t>(iv);
        break;
      case DType::U8:
        x.data<uint8_t>()[i] = static_cast<uint8_t>(iv);
        break;
      case DType::Bool:
        x.data<uint8_t>()[i] = rng() % 2;
        break;
      case DType::U32:
        x.data<uint32_t>()[i] = static_cast<uint32_t>(edge ? iv : iv + 100) % (edge ? ~0u : 71u);
        break;
      case DType::U64:
        x.data<uint64_t>()[i] = edge ? static_cast<uint64_t>(iv) : static_cast<uint64_t>(iv + 100) % 71;
        break;
      default:
        if (is_low_bit_float(t.dtype)) {  // every code, NaNs and Infs included
          x.data<uint8_t>()[i] = static_cast<uint8_t>((i < 256 ? i : rng()) & ((1 << low_bit_width(t.dtype)) - 1));
        } else if (is_low_bit_int(t.dtype)) {
          auto [lo, hi] = low_bit_int_range(t.dtype);
          x.set_int(i, lo + static_cast<int64_t>(rng() % uint64_t(hi - lo + 1)));
        } else {
          x.set_double(i, static_cast<double>(std::llabs(iv % 1000)));
        }
        break;
    }
  }
  return x;
}

bool is_nan_bits(DType t, const uint8_t* p) {
  switch (t) {
    case DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return std::isnan(v);
    }
    case DType::F64: {
      double v;
      std::memcpy(&v, p, 8);
      return std::isnan(v);
    }
    case DType::F16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return std::isnan(half_to_float(v));
    }
    case DType::BF16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return std::isnan(bf16_to_float(v));
    }
    default:
      return is_low_bit_float(t) && std::isnan(low_bit_to_float(t, *p));
  }
}

const std::vector<DType> kDTypes = {DType::F32,        DType::F16,    DType::BF16,     DType::F64,        DType::I32,
                                    DType::I64,        DType::Bool,   DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2,
                                    DType::F8E5M2FNUZ, DType::F8E8M0, DType::F4E2M1,   DType::I4,         DType::U4,
                                    DType::I2,         DType::U2};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const OpDef* def : op_registry().all()) {
    if (def->category != OpCategory::Pointwise) continue;
    const int n = def->min_inputs;
    // Shapes: the first operand at full size or broadcast, the others smaller.
    std::vector<std::vector<Shape>> shape_sets;
    if (n == 1) shape_sets = {{{6, 37, 13}}};
    else if (n == 2) shape_sets = {{{6, 1, 13}, {37, 1}}, {{6, 37, 13}, {37, 1}}};
    else shape_sets = {{{6, 1, 13}, {37, 1}, {13}}, {{6, 37, 13}, {37, 1}, {1, 13}}};
    // Ops that take none of kDTypes (the shifts: unsigned only) run on u8/u32/u64.
    const size_t before = cases.size();
    for (const std::vector<DType>& dtypes : {kDTypes, std::vector<DType>{DType::U8, DType::U32, DType::U64}}) {
      if (cases.size() > before) break;
      for (auto& [attrs, attrs_text] : attr_variants(*def)) {
        for (DType x : dtypes) {
          // Operand dtype lists to try: all x, then the mixed forms some ops take.
          std::vector<std::vector<DType>> dts = {std::vector<DType>(n, x)};
          if (n == 2) dts.push_back({x, DType::I32});
          if (n == 3) {
            dts.push_back({DType::F32, DType::F32, x});  // quantize_linear to a low-bit zero point's type
            dts.push_back({DType::F16, DType::F16, x});
            dts.push_back({DType::Bool, x, x});
            dts.push_back({x, DType::F32, DType::I8});
            dts.push_back({x, DType::F32, DType::I32});
            dts.push_back({x, DType::F32, x});
          }
          for (const auto& dl : dts) {
            if (dl != dts[0] && dl == std::vector<DType>(n, x)) continue;
            for (const auto& shapes : shape_sets) {
              std::vector<TensorType> in;
              for (int i = 0; i < n; ++i) in.emplace_back(dl[i], shapes[i]);
              std::optional<TensorType> out = try_infer(*def, in, attrs);
              if (!out) continue;
              Case c{def, attrs, attrs_text, in, *out, {}};
              cases.push_back(std::move(c));
              break;  // the first shape set that infers
            }
          }
        }
      }
    }
  }
  return cases;
}

std::string describe(const Case& c) {
  std::string s = c.def->name;
  if (!c.attrs_text.empty()) s += "[" + c.attrs_text + "]";
  s += "(";
  for (size_t i = 0; i < c.in.size(); ++i) s += (i ? ", " : "") + c.in[i].str();
  return s + ") -> " + c.out.str();
}

TEST(CodegenPointwise, EveryPointwiseOpCompilesAndMatchesReferenceOnSim) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  std::vector<Case> cases = all_cases();
  ASSERT_GT(cases.size(), 100u);
  std::vector<codegen::KernelSource> sources;
  std::set<std::string> ops_seen;
  for (Case& c : cases) {
    c.kernel = codegen::emit_pointwise_op(*c.def, c.attrs, c.in, c.out);
    sources.push_back({c.kernel.name, c.kernel.source});
    ops_seen.insert(c.def->name);
  }
  int pointwise_ops = 0;
  for (const OpDef* def : op_registry().all()) {
    if (def->category != OpCategory::Pointwise) continue;
    ++pointwise_ops;
    EXPECT_TRUE(ops_seen.count(def->name)) << def->name << ": no dtype among f32/f16/bf16/i32/i64/bool infers";
  }
  auto t1 = clock::now();

  // (a) NVRTC, sm_80 and sm_90 (cached on disk like any kernel).
  codegen::KernelCache cache;
  int max_regs = 0, spills = 0;
  std::string max_regs_kernel;
  int nvrtc_runs = 0;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks = compiler.compile(sources);
    nvrtc_runs += compiler.nvrtc_compilations();
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty()) << describe(cases[i]);
      EXPECT_GT(ks[i].registers, 0) << describe(cases[i]);
      if (ks[i].registers > max_regs) {
        max_regs = ks[i].registers;
        max_regs_kernel = describe(cases[i]) + " " + arch;
      }
      if (ks[i].spill_bytes > 0) {
        ++spills;
        fmt::print("  spills: {} on {}: {} bytes\n", describe(cases[i]), arch, ks[i].spill_bytes);
      }
    }
  }
  auto t2 = clock::now();

  // (b) The simulator against the reference.
  codegen::SimCompiler sim;
  std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  auto t3 = clock::now();
  int exact = 0;
  std::map<std::string, int> failing;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    std::vector<Tensor> ins;
    std::vector<const Tensor*> ptrs;
    for (size_t i = 0; i < c.in.size(); ++i) ins.push_back(make_data(c.in[i], ci * 31 + i + 1));
    for (const Tensor& t : ins) ptrs.push_back(&t);
    Tensor want = evaluate_op(*c.def, c.attrs, ptrs, {c.out}, "node")[0];
    Tensor got(c.out);
    std::memset(got.raw(), 0xa5, got.nbytes());
    std::vector<void*> bufs = {got.raw()};
    std::vector<long long> counts = {static_cast<long long>(got.numel())};
    for (Tensor& t : ins) {
      bufs.push_back(t.raw());
      counts.push_back(t.numel());
    }
    sim::LaunchConfig cfg;
    cfg.kernel = c.kernel.name;
    cfg.grid = dim3(c.kernel.grid);
    cfg.block = dim3(c.kernel.block);
    ASSERT_NO_THROW(codegen::sim_launch(entries.at(c.kernel.name), cfg, bufs, counts)) << describe(c);
    const size_t es = dtype_size(c.out.dtype);
    int bad = 0;
    std::string first;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const uint8_t* g = got.bytes().data() + i * es;
      const uint8_t* w = want.bytes().data() + i * es;
      if (std::memcmp(g, w, es) == 0) continue;
      if (is_nan_bits(c.out.dtype, g) && is_nan_bits(c.out.dtype, w)) continue;
      if (bad++ == 0) {
        std::string in_vals;
        for (const Tensor& t : ins) in_vals += fmt::format(" {}", t.get_double(0));
        first = fmt::format("element {}: got {} want {}", i, got.get_double(i), want.get_double(i));
      }
    }
    if (bad) {
      ADD_FAILURE() << describe(c) << ": " << bad << " of " << got.numel() << " elements differ; " << first;
      failing[describe(c)] = bad;
    } else {
      ++exact;
    }
  }
  auto t4 = clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  fmt::print(
      "codegen pointwise: {} kernels for {} pointwise ops, all compiled for sm_80/sm_90 ({} NVRTC runs, the rest "
      "cached), max registers {} ({}), {} with spills; {} of {} match the reference exactly on the simulator\n",
      sources.size(), pointwise_ops, nvrtc_runs, max_regs, max_regs_kernel, spills, exact, cases.size());
  fmt::print("  times: emit {:.2f}s, nvrtc {:.2f}s, sim build {:.2f}s ({} modules built, {} cached), run {:.2f}s\n",
             secs(t0, t1), secs(t1, t2), secs(t2, t3), sim.compilations(), sim.cache_hits(), secs(t3, t4));
  EXPECT_EQ(spills, 0);
}

// Broadcasting layouts: dims are merged where every operand reads them
// contiguously, and a scalar operand reads element 0.
TEST(CodegenPointwise, EmitsBroadcastIndexing) {
  const OpDef& add = op_registry().get("add");
  auto k = codegen::emit_pointwise_op(add, {}, {TensorType(DType::F32, {4, 5, 6}), TensorType(DType::F32, {})},
                                      TensorType(DType::F32, {4, 5, 6}));
  EXPECT_NE(k.source.find("in0[i]"), std::string::npos) << k.source;
  EXPECT_NE(k.source.find("in1[0]"), std::string::npos) << k.source;
  const std::string body = k.source.substr(k.source.find("__global__"));
  EXPECT_EQ(body.find(" % "), std::string::npos) << body;  // no coordinates needed
  EXPECT_EQ(k.grid, 1u);
  auto k2 = codegen::emit_pointwise_op(add, {}, {TensorType(DType::F32, {4, 5, 6}), TensorType(DType::F32, {4, 1, 6})},
                                       TensorType(DType::F32, {4, 5, 6}));
  EXPECT_NE(k2.source.find("r % 6;"), std::string::npos) << k2.source;
  EXPECT_NE(k2.source.find("r % 5;"), std::string::npos) << k2.source;
  // Names are deterministic and differ with the shapes.
  EXPECT_EQ(k2.name,
            codegen::emit_pointwise_op(add, {}, {TensorType(DType::F32, {4, 5, 6}), TensorType(DType::F32, {4, 1, 6})},
                                       TensorType(DType::F32, {4, 5, 6}))
                .name);
  EXPECT_NE(k.name, k2.name);
  EXPECT_THROW(codegen::emit_pointwise_op(add, {}, {TensorType(DType::F32, {4, 5}), TensorType(DType::F32, {3})},
                                          TensorType(DType::F32, {4, 5})),
               Error);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

struct TempCache {
  std::filesystem::path path;
  TempCache() {
    std::string t = (std::filesystem::temp_directory_path() / "kiln_simmod_XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempCache() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

codegen::PointwiseKernel relu_kernel(int64_t n) {
  return codegen::emit_pointwise_op(op_registry().get("relu"), {}, {TensorType(DType::F32, {n})},
                                    TensorType(DType::F32, {n}));
}

// The module cache: a second compiler finds the module; a key that differs
// (here: a corrupted key file) is a miss that rebuilds; out-of-bounds
// accesses come back through the module's entry as SimError.
TEST(SimModule, CachesModulesAndReportsOutOfBounds) {
  TempCache dir;
  codegen::PointwiseKernel k = relu_kernel(1000);
  {
    codegen::SimCompiler a(dir.path);
    a.compile({{k.name, k.source}});
    EXPECT_EQ(a.compilations(), 1);
  }
  codegen::SimCompiler b(dir.path);
  auto entries = b.compile({{k.name, k.source}});
  EXPECT_EQ(b.compilations(), 0);
  EXPECT_EQ(b.cache_hits(), 1);
  std::vector<float> x(1000), y(1000);
  for (int i = 0; i < 1000; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  sim::LaunchConfig cfg;
  cfg.kernel = k.name;
  cfg.grid = dim3(k.grid);
  cfg.block = dim3(k.block);
  codegen::sim_launch(entries.at(k.name), cfg, {y.data(), x.data()}, {1000, 1000});
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(y[i], std::max(x[i], 0.0f)) << i;
  // An operand buffer shorter than the kernel reads: caught, named. (The
  // kernel reads float4 vectors: 999 floats hold 249 of them, the last
  // chunk reads the 250th.)
  try {
    codegen::sim_launch(entries.at(k.name), cfg, {y.data(), x.data()}, {1000, 999});
    ADD_FAILURE() << "no error";
  } catch (const sim::SimError& e) {
    EXPECT_NE(std::string(e.what()).find("argument in0: index 249 out of bounds [0, 249)"), std::string::npos)
        << e.what();
  }
  // A key file that does not match is a miss.
  for (auto& f : std::filesystem::directory_iterator(b.dir()))
    if (f.path().extension() == ".key") std::ofstream(f.path(), std::ios::app) << "x";
  codegen::SimCompiler c(dir.path);
  c.compile({{k.name, k.source}});
  EXPECT_EQ(c.compilations(), 1);
}

TEST(SimModule, CompilerErrorCarriesTheLog) {
  TempCache dir;
  codegen::SimCompiler s(dir.path);
  try {
    s.compile({{"broken", "extern \"C\" __global__ void broken() { undeclared_thing(); }\n"}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undeclared_thing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
