#include "frontend/symbolic_inputs.h"

#include <fmt/format.h>

#include <onnx/onnx_pb.h>

#include "ir/error.h"
#include "ir/floor_div_dims.h"
#include "ir/symbolic_dim.h"
#include "ir/text_format.h"

namespace kiln {

namespace {

const Shape* find_shape(const std::map<std::string, Shape>& m, const std::string& name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

// "<input>_dim<i>" made an identifier: other bytes become '_'.
std::string unnamed_symbol(const std::string& input, int i) {
  std::string s;
  for (char c : input) s += is_ident_char(c) && c != '.' ? c : '_';
  if (s.empty() || !is_ident_start(s[0])) s = "_" + s;
  return fmt::format("{}_dim{}", s, i);
}

}  // namespace

int64_t InputSymbols::declare(const std::string& name, int64_t lo, int64_t hi, const std::string& input,
                              const std::string& ctx) {
  for (const SymbolDecl& d : decls_) {
    if (d.name != name) continue;
    if (d.min != lo || d.max != hi)
      fail(
          "{}: symbol \"{}\" has the range [{}, {}] here but [{}, {}] for input \"{}\" (inputs sharing a dim_param "
          "need one range)",
          ctx, name, lo, hi, d.min, d.max, first_input_[name]);
    return symbol_dim(name);
  }
  decls_.push_back({name, lo, hi});
  first_input_[name] = input;
  return symbol_dim(name);
}

ShapeOptionNames ShapeOptionNames::c_api() {
  ShapeOptionNames n;
  n.shapes = "kiln_compile_options_set_input_shape";
  n.min = "kiln_compile_options_set_input_range's min";
  n.opt = "kiln_compile_options_set_input_range's opt";
  n.max = "kiln_compile_options_set_input_range's max";
  n.fix = "kiln_compile_options_set_input_shape for \"{}\"";
  n.range = n.profile = "kiln_compile_options_set_input_range";
  return n;
}

ShapeOptionNames ShapeOptionNames::cpp_api() {
  ShapeOptionNames n;
  n.shapes = "kiln::Compiler::input_shape";
  n.min = "kiln::Compiler::input_range's min";
  n.opt = "kiln::Compiler::input_range's opt";
  n.max = "kiln::Compiler::input_range's max";
  n.fix = "kiln::Compiler::input_shape(\"{}\", dims)";
  n.range = n.profile = "kiln::Compiler::input_range";
  return n;
}

ShapeOptionNames ShapeOptionNames::python() {
  ShapeOptionNames n;
  n.shapes = "shapes=";
  n.min = "min_shapes=";
  n.opt = "opt_shapes=";
  n.max = "max_shapes=";
  n.fix = "shapes={{\"{}\": [...]}}";
  n.range = "min_shapes= and max_shapes= (or profiles=)";
  n.profile = "min_shapes=/opt_shapes=/max_shapes= (or profiles=)";
  return n;
}

std::string ShapeOptionNames::fix_for(const std::string& input) const { return fmt::format(fmt::runtime(fix), input); }

Shape symbolic_input_dims(const onnx::TensorShapeProto& shape, const std::string& input, const ImportOptions& opts,
                          const std::string& ctx, InputSymbols& symbols) {
  const int rank = shape.dim_size();
  const Shape* lo = find_shape(opts.min_shapes, input);
  const Shape* hi = find_shape(opts.max_shapes, input);
  const Shape* opt = find_shape(opts.opt_shapes, input);
  const ShapeOptionNames& names = opts.names;
  if ((lo || hi || opt) && !(lo && hi))
    fail("{}: give both {} and {} for it ({} is missing)", ctx, names.min, names.max, lo ? names.max : names.min);
  for (auto [flag, s] : std::initializer_list<std::pair<const std::string&, const Shape*>>{
           {names.min, lo}, {names.opt, opt}, {names.max, hi}})
    if (s && static_cast<int>(s->size()) != rank)
      fail("{}: {} gives rank {} but the model declares rank {}", ctx, flag, s->size(), rank);
  Shape dims;
  for (int i = 0; i < rank; ++i) {
    const auto& d = shape.dim(i);
    if (d.has_dim_value() && d.dim_value() < 0) fail("{}: dimension {} is negative ({})", ctx, i, d.dim_value());
    if (lo) {
      int64_t mn = (*lo)[i], mx = (*hi)[i];
      if (mn > mx) fail("{}: dim {} has {} {} above {} {}", ctx, i, names.min, mn, names.max, mx);
      if (opt && ((*opt)[i] < mn || (*opt)[i] > mx))
        fail("{}: dim {} has {} {} outside [{}, {}]", ctx, i, names.opt, (*opt)[i], mn, mx);
      if (d.has_dim_value() && (mn != d.dim_value() || mx != d.dim_value()))
        fail("{}: {} gives dim {} the range [{}, {}] but the model fixes it at {}", ctx, names.profile, i, mn, mx,
             d.dim_value());
    }
    if (d.has_dim_value()) {
      dims.push_back(d.dim_value());
      continue;
    }
    std::string param = d.has_dim_param() ? d.dim_param() : "";
    if (!lo) {
      std::string sym = param.empty() ? "" : fmt::format(" (\"{}\")", param);
      fail("{}: dimension {}{} is not fixed; set it with {}, or give its range with {}", ctx, i, sym,
           names.fix_for(input), names.range);
    }
    int64_t mn = (*lo)[i], mx = (*hi)[i];
    if (mn == mx) {  // a range of one value: a fixed dim
      dims.push_back(mn);
      continue;
    }
    std::string name = param.empty() ? unnamed_symbol(input, i) : param;
    if (!is_symbol_name(name))
      fail("{}: dim {} is named \"{}\", which kiln cannot use as a symbol (an identifier is needed); fix it with {}",
           ctx, i, name, names.shapes);
    // A name that spells a derived symbol (ir/floor_div_dims.h) would be read as floor((t*x+p)/d).
    if (parse_derived_symbol(name))
      fail("{}: dim {} is named \"{}\", which kiln reads as a derived size (floor division); fix it with {}", ctx, i,
           name, names.shapes);
    dims.push_back(symbols.declare(name, mn, mx, input, ctx));
  }
  return dims;
}

}  // namespace kiln
