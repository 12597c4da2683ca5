#include "runtime/plan_bounded_sizes.h"

#include <fmt/format.h>

#include <cstring>
#include <set>

#include "ir/error.h"
#include "runtime/plan_format.h"
#include "runtime/plan_generic_launches.h"
#include "runtime/plan_sections.h"

namespace kiln::plan {

namespace detail {

// u64 count entries; per entry its symbol, i64 bound, u32 output, node text;
// u64 user outputs; per output u64 rank and a polynomial per dim.
std::vector<uint8_t> write_bounded_sizes(const BoundedSizes& s) {
  Writer w;
  w.put<uint64_t>(s.counts.size());
  for (const SizeCount& c : s.counts) {
    w.str(c.symbol);
    w.put<int64_t>(c.bound);
    w.put<uint32_t>(c.output);
    w.str(c.node);
  }
  w.put<uint64_t>(s.outputs.size());
  for (const std::vector<DimPoly>& dims : s.outputs) {
    w.put<uint64_t>(dims.size());
    for (const DimPoly& d : dims) put_poly(w, d);
  }
  return w.bytes;
}

BoundedSizes read_bounded_sizes(Reader r) {
  BoundedSizes s;
  uint64_t n = r.count("size count", 36);
  for (uint64_t i = 0; i < n; ++i) {
    SizeCount c;
    c.symbol = r.str("size symbol");
    c.bound = r.get<int64_t>("size bound");
    c.output = r.get<uint32_t>("size count output");
    c.node = r.str("size node");
    s.counts.push_back(std::move(c));
  }
  uint64_t outs = r.count("bounded output count", 8);
  for (uint64_t i = 0; i < outs; ++i) {
    uint64_t rank = r.count("bounded output rank", 8);
    std::vector<DimPoly> dims;
    for (uint64_t d = 0; d < rank; ++d) dims.push_back(get_poly(r, fmt::format("output {} dim {}", i, d)));
    s.outputs.push_back(std::move(dims));
  }
  r.expect_end();
  return s;
}

}  // namespace detail

void check_bounded_sizes(const BoundedSizes& s, const Graph& g, std::string_view what) {
  const size_t users = s.outputs.size(), total = g.outputs().size();
  if (s.counts.empty() || users + s.counts.size() != total)
    fail("{}: section 'bounded sizes' has {} outputs and {} counts, the graph has {} outputs", what, users,
         s.counts.size(), total);
  SymbolBindings bounds;
  for (size_t k = 0; k < s.counts.size(); ++k) {
    const SizeCount& c = s.counts[k];
    if (!is_symbol_name(c.symbol) || c.bound < 0 || !bounds.emplace(c.symbol, c.bound).second)
      fail("{}: section 'bounded sizes': count {} has symbol '{}' and bound {}", what, k, c.symbol, c.bound);
    if (c.output != users + k)
      fail("{}: section 'bounded sizes': count {} ({}) is output {}, expected {}", what, k, c.symbol, c.output,
           users + k);
    const TensorType& t = g.outputs()[c.output]->type();
    if (t.dtype != DType::I64 || t.numel() != 1)
      fail("{}: section 'bounded sizes': count {} ({}) is output %{} of type {}, expected one i64", what, k, c.symbol,
           g.outputs()[c.output]->name(), t.str());
  }
  for (size_t i = 0; i < users; ++i) {
    const Shape& at_bound = g.outputs()[i]->shape();
    if (s.outputs[i].size() != at_bound.size())
      fail("{}: section 'bounded sizes': output {} has rank {}, the graph's %{} rank {}", what, i, s.outputs[i].size(),
           g.outputs()[i]->name(), at_bound.size());
    for (size_t d = 0; d < at_bound.size(); ++d) {
      for (const auto& [mono, coeff] : s.outputs[i][d])
        for (const std::string& sym : mono)
          if (!bounds.count(sym))
            fail("{}: section 'bounded sizes': output {} dim {} uses '{}', which is no count's symbol", what, i, d,
                 sym);
      int64_t v = eval_poly(s.outputs[i][d], bounds);
      if (v != at_bound[d])
        fail("{}: section 'bounded sizes': output {} dim {} is {} at the bounds, the graph's %{} has {}", what, i, d, v,
             g.outputs()[i]->name(), at_bound[d]);
    }
  }
}

SymbolBindings bind_counts(const BoundedSizes& s, const std::vector<int64_t>& counts) {
  KILN_CHECK(counts.size() == s.counts.size(), "{} counts for {} sizes", counts.size(), s.counts.size());
  SymbolBindings b;
  for (size_t k = 0; k < counts.size(); ++k) {
    const SizeCount& c = s.counts[k];
    if (counts[k] < 0 || counts[k] > c.bound)
      fail("{}: the run gave its result size {} = {}, outside [0, {}] (its bound)", c.node, c.symbol, counts[k],
           c.bound);
    b[c.symbol] = counts[k];
  }
  return b;
}

Shape real_shape(const BoundedSizes& s, size_t i, const SymbolBindings& b) {
  Shape r;
  for (const DimPoly& d : s.outputs.at(i)) r.push_back(eval_poly(d, b));
  return r;
}

Shape symbolic_shape(const BoundedSizes& s, size_t i) {
  Shape r;
  for (const DimPoly& d : s.outputs.at(i)) r.push_back(dim_of_poly(d));
  return r;
}

void trim_in_place(void* data, DType dtype, const Shape& bound, const Shape& real) {
  KILN_CHECK(bound.size() == real.size(), "trimming [{}] to [{}]", fmt::join(bound, ","), fmt::join(real, ","));
  if (bound == real) return;
  const size_t rank = bound.size();
  int64_t rows = 1;
  for (size_t d = 0; d < rank; ++d) {
    KILN_CHECK(real[d] >= 0 && real[d] <= bound[d], "trimming [{}] to [{}]", fmt::join(bound, ","),
               fmt::join(real, ","));
    if (d + 1 < rank) rows *= real[d];
  }
  if (rank == 0 || rows == 0 || real[rank - 1] == 0) return;
  // One contiguous run per row of the last dim: real[rank-1] entries, from
  // the row's place at `bound` to its place at `real`.
  const size_t esize = dtype_size(dtype), run = static_cast<size_t>(real[rank - 1]) * esize;
  auto* bytes = static_cast<uint8_t*>(data);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t src = 0;
    for (size_t d = 0; d + 1 < rank; ++d) src = src * bound[d] + idx[d];
    src *= bound[rank - 1];
    const size_t dst = static_cast<size_t>(row) * run, from = static_cast<size_t>(src) * esize;
    if (dst != from) std::memmove(bytes + dst, bytes + from, run);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < real[d]) break;
      idx[d] = 0;
    }
  }
}

std::vector<Tensor> trim_outputs(const BoundedSizes& s, std::vector<Tensor> outs, SymbolBindings* bound) {
  KILN_CHECK(outs.size() == s.outputs.size() + s.counts.size(), "{} outputs for {} and {} counts", outs.size(),
             s.outputs.size(), s.counts.size());
  std::vector<int64_t> counts;
  for (size_t k = 0; k < s.counts.size(); ++k) counts.push_back(outs[s.outputs.size() + k].data<int64_t>()[0]);
  SymbolBindings b = bind_counts(s, counts);
  outs.resize(s.outputs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    Shape real = real_shape(s, i, b);
    // On a copy: an executor's output may share its bytes with an input.
    Tensor work(outs[i].type());
    if (work.nbytes()) std::memcpy(work.raw(), outs[i].raw(), work.nbytes());
    trim_in_place(work.raw(), work.dtype(), work.shape(), real);
    Tensor t(TensorType(outs[i].dtype(), real));
    if (t.nbytes()) std::memcpy(t.raw(), work.raw(), t.nbytes());
    outs[i] = std::move(t);
  }
  if (bound) *bound = std::move(b);
  return outs;
}

}  // namespace kiln::plan
