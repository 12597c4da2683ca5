#include "frontend/symbolic_inputs.h"

#include <onnx/onnx_pb.h>

#include "ir/error.h"
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

Shape symbolic_input_dims(const onnx::TensorShapeProto& shape, const std::string& input, const ImportOptions& opts,
                          const std::string& ctx, InputSymbols& symbols) {
  const int rank = shape.dim_size();
  const Shape* lo = find_shape(opts.min_shapes, input);
  const Shape* hi = find_shape(opts.max_shapes, input);
  const Shape* opt = find_shape(opts.opt_shapes, input);
  if ((lo || hi || opt) && !(lo && hi))
    fail("{}: give both --min-shapes and --max-shapes for it ({} is missing)", ctx,
         lo ? "--max-shapes" : "--min-shapes");
  for (auto [flag, s] : std::initializer_list<std::pair<const char*, const Shape*>>{
           {"--min-shapes", lo}, {"--opt-shapes", opt}, {"--max-shapes", hi}})
    if (s && static_cast<int>(s->size()) != rank)
      fail("{}: {} gives rank {} but the model declares rank {}", ctx, flag, s->size(), rank);
  Shape dims;
  for (int i = 0; i < rank; ++i) {
    const auto& d = shape.dim(i);
    if (d.has_dim_value() && d.dim_value() < 0) fail("{}: dimension {} is negative ({})", ctx, i, d.dim_value());
    if (lo) {
      int64_t mn = (*lo)[i], mx = (*hi)[i];
      if (mn > mx) fail("{}: dim {} has --min-shapes {} above --max-shapes {}", ctx, i, mn, mx);
      if (opt && ((*opt)[i] < mn || (*opt)[i] > mx))
        fail("{}: dim {} has --opt-shapes {} outside [{}, {}]", ctx, i, (*opt)[i], mn, mx);
      if (d.has_dim_value() && (mn != d.dim_value() || mx != d.dim_value()))
        fail("{}: --min-shapes/--max-shapes give dim {} the range [{}, {}] but the model fixes it at {}", ctx, i, mn,
             mx, d.dim_value());
    }
    if (d.has_dim_value()) {
      dims.push_back(d.dim_value());
      continue;
    }
    std::string param = d.has_dim_param() ? d.dim_param() : "";
    if (!lo) {
      std::string sym = param.empty() ? "" : fmt::format(" (\"{}\")", param);
      fail(
          "{}: dimension {}{} is not fixed; set it with --shapes {}:DIMS, or give its range with --min-shapes and "
          "--max-shapes",
          ctx, i, sym, input);
    }
    int64_t mn = (*lo)[i], mx = (*hi)[i];
    if (mn == mx) {  // a range of one value: a fixed dim
      dims.push_back(mn);
      continue;
    }
    std::string name = param.empty() ? unnamed_symbol(input, i) : param;
    if (!is_symbol_name(name))
      fail(
          "{}: dim {} is named \"{}\", which kiln cannot use as a symbol (an identifier is needed); fix it with "
          "--shapes",
          ctx, i, name);
    dims.push_back(symbols.declare(name, mn, mx, input, ctx));
  }
  return dims;
}

}  // namespace kiln
