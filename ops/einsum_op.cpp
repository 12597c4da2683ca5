// einsum: Einstein summation with numpy's rules: implicit output (labels
// used once, in character order, after the ellipsis dims), '...' dims that
// broadcast across operands, size-1 dims that broadcast, and repeated labels
// within an operand reading its diagonal. The reference kernel is a direct
// loop over output indices and summed indices with precomputed strides,
// accumulating in double (floats) or wrapping 64-bit integers.
#include <algorithm>

#include "ops/linalg_internal.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace {

using namespace linalg;

// Labels: 'A'-'Z' -> 0..25, 'a'-'z' -> 26..51 (so label order is character
// order, as numpy sorts implicit outputs); ellipsis dims -> 52 + j.
constexpr int kEllipsisBase = 52;

struct EinsumSpec {
  std::vector<std::vector<int>> in_labels;  // per operand, the label of each dim
  std::vector<int> out_labels;
  std::vector<int64_t> size;  // per label; -1 when unused
};

int letter_label(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return 26 + (ch - 'a');
  return -1;
}
char label_letter(int l) { return l < 26 ? char('A' + l) : char('a' + l - 26); }

// Splits a term into letters and the position of "..." (-1 when none).
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;  // index into letters where the ellipsis sits
};

Term parse_term(const std::string& t, const std::string& eq) {
  Term r;
  for (size_t i = 0; i < t.size();) {
    if (t[i] == '.') {
      if (t.compare(i, 3, "...") != 0 || r.ellipsis_at >= 0)
        fail("einsum equation '{}': '.' must appear as one '...' per term", eq);
      r.ellipsis_at = static_cast<int>(r.letters.size());
      i += 3;
      continue;
    }
    int l = letter_label(t[i]);
    if (l < 0) fail("einsum equation '{}': unexpected character '{}'", eq, t[i]);
    r.letters.push_back(l);
    ++i;
  }
  return r;
}

EinsumSpec parse_einsum(const std::string& equation, const std::vector<Shape>& shapes) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ' && ch != '\t') eq += ch;
  EinsumSpec s;
  std::string lhs = eq, rhs;
  bool has_arrow = false;
  if (auto p = eq.find("->"); p != std::string::npos) {
    has_arrow = true;
    lhs = eq.substr(0, p);
    rhs = eq.substr(p + 2);
    if (rhs.find("->") != std::string::npos) fail("einsum equation '{}' has more than one '->'", equation);
  }
  std::vector<std::string> terms;
  size_t start = 0;
  for (size_t i = 0; i <= lhs.size(); ++i)
    if (i == lhs.size() || lhs[i] == ',') {
      terms.push_back(lhs.substr(start, i - start));
      start = i + 1;
    }
  if (terms.size() != shapes.size())
    fail("einsum equation '{}' has {} operand terms but the op has {} operands", equation, terms.size(), shapes.size());
  std::vector<Term> parsed;
  int max_ell = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    parsed.push_back(parse_term(terms[k], equation));
    int nl = static_cast<int>(parsed[k].letters.size()), rank = static_cast<int>(shapes[k].size());
    if (parsed[k].ellipsis_at < 0 ? rank != nl : rank < nl)
      fail("einsum equation '{}': term '{}' does not match operand {} of rank {}", equation, terms[k], k, rank);
    if (parsed[k].ellipsis_at >= 0) max_ell = std::max(max_ell, rank - nl);
  }
  s.size.assign(kEllipsisBase + max_ell, -1);
  std::vector<int> count(kEllipsisBase, 0);
  for (size_t k = 0; k < parsed.size(); ++k) {
    const Term& t = parsed[k];
    int rank = static_cast<int>(shapes[k].size());
    int ne = t.ellipsis_at < 0 ? 0 : rank - static_cast<int>(t.letters.size());
    std::vector<int> labels;
    for (int i = 0; i <= static_cast<int>(t.letters.size()); ++i) {
      if (i == t.ellipsis_at)
        for (int j = 0; j < ne; ++j) labels.push_back(kEllipsisBase + max_ell - ne + j);
      if (i < static_cast<int>(t.letters.size())) {
        labels.push_back(t.letters[i]);
        ++count[t.letters[i]];
      }
    }
    for (int dim = 0; dim < rank; ++dim) {
      int l = labels[dim];
      int64_t n = shapes[k][dim];
      int64_t& sz = s.size[l];
      // Sizes must agree; a size-1 dim broadcasts (as in numpy).
      if (sz < 0 || sz == 1) {
        sz = n;
      } else if (n != sz && n != 1) {
        fail("einsum equation '{}': dimension '{}' is {} in operand {} but {} elsewhere", equation,
             l < kEllipsisBase ? std::string(1, label_letter(l)) : std::string("..."), n, k, sz);
      }
    }
    s.in_labels.push_back(std::move(labels));
  }
  if (has_arrow) {
    Term out = parse_term(rhs, equation);
    std::vector<bool> seen(kEllipsisBase, false);
    for (int i = 0; i <= static_cast<int>(out.letters.size()); ++i) {
      if (i == out.ellipsis_at)
        for (int j = 0; j < max_ell; ++j) s.out_labels.push_back(kEllipsisBase + j);
      if (i < static_cast<int>(out.letters.size())) {
        int l = out.letters[i];
        if (seen[l]) fail("einsum equation '{}': output label '{}' appears twice", equation, label_letter(l));
        if (!count[l]) fail("einsum equation '{}': output label '{}' is not in any operand", equation, label_letter(l));
        seen[l] = true;
        s.out_labels.push_back(l);
      }
    }
    if (out.ellipsis_at < 0 && max_ell > 0)
      fail("einsum equation '{}': operands have '...' dims but the output has no '...'", equation);
  } else {
    for (int j = 0; j < max_ell; ++j) s.out_labels.push_back(kEllipsisBase + j);
    for (int l = 0; l < kEllipsisBase; ++l)
      if (count[l] == 1) s.out_labels.push_back(l);
  }
  return s;
}

template <typename T>
void einsum_kernel(const EinsumSpec& s, const std::vector<std::vector<T>>& ins, const std::vector<Shape>& shapes,
                   std::vector<T>& out) {
  int nl = static_cast<int>(s.size.size());
  int nin = static_cast<int>(ins.size());
  // Stride of each label in each operand (repeated labels add up: a diagonal).
  std::vector<std::vector<int64_t>> stride(nin, std::vector<int64_t>(nl, 0));
  for (int k = 0; k < nin; ++k) {
    std::vector<int64_t> st = strides_of(shapes[k]);
    for (size_t dim = 0; dim < shapes[k].size(); ++dim)
      if (shapes[k][dim] != 1) stride[k][s.in_labels[k][dim]] += st[dim];
  }
  std::vector<bool> is_out(nl, false);
  for (int l : s.out_labels) is_out[l] = true;
  std::vector<int> sum_labels;
  for (int l = 0; l < nl; ++l)
    if (s.size[l] >= 0 && !is_out[l]) sum_labels.push_back(l);
  int64_t nsum = 1;
  for (int l : sum_labels) nsum *= s.size[l];
  int no = static_cast<int>(s.out_labels.size()), ns = static_cast<int>(sum_labels.size());
  std::vector<int64_t> oidx(no, 0), sidx(ns, 0), base(nin, 0), off(nin, 0);
  for (size_t o = 0; o < out.size(); ++o) {
    T acc = T(0);
    if (nsum > 0) {
      std::fill(sidx.begin(), sidx.end(), 0);
      off = base;
      for (int64_t it = 0; it < nsum; ++it) {
        T p = ins[0][off[0]];
        for (int k = 1; k < nin; ++k) p = p * ins[k][off[k]];
        acc = acc + p;
        for (int q = ns - 1; q >= 0; --q) {
          int l = sum_labels[q];
          ++sidx[q];
          for (int k = 0; k < nin; ++k) off[k] += stride[k][l];
          if (sidx[q] < s.size[l]) break;
          for (int k = 0; k < nin; ++k) off[k] -= stride[k][l] * sidx[q];
          sidx[q] = 0;
        }
      }
    }
    out[o] = acc;
    for (int q = no - 1; q >= 0; --q) {
      int l = s.out_labels[q];
      ++oidx[q];
      for (int k = 0; k < nin; ++k) base[k] += stride[k][l];
      if (oidx[q] < s.size[l]) break;
      for (int k = 0; k < nin; ++k) base[k] -= stride[k][l] * oidx[q];
      oidx[q] = 0;
    }
  }
}

EinsumSpec einsum_spec(InferContext& c) {
  std::vector<Shape> shapes;
  for (int i = 0; i < c.num_inputs(); ++i) shapes.push_back(c.shape(i));
  try {
    return parse_einsum(c.attrs().get_string("equation", ""), shapes);
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
}

OpDef einsum_op() {
  OpDef d;
  d.name = "einsum";
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.attrs = {{"equation", AttrKind::String, true}};
  d.infer = [](InferContext& c) {
    for (int i = 0; i < c.num_inputs(); ++i)
      if (!c.has_input(i)) c.fail("operand {} is missing", i);
    require_same_dtype(c);
    require_numeric(c, 0);
    EinsumSpec s = einsum_spec(c);
    Shape out;
    for (int l : s.out_labels) out.push_back(s.size[l]);
    return std::vector<TensorType>{TensorType(c.dtype(0), out)};
  };
  d.reference = [](KernelContext& ctx) {
    std::vector<Shape> shapes;
    for (size_t i = 0; i < ctx.inputs.size(); ++i) shapes.push_back(ctx.in(int(i)).shape());
    EinsumSpec s = parse_einsum(ctx.attrs.get_string("equation", ""), shapes);
    Tensor& out = ctx.out();
    auto run = [&](auto z) {
      using T = decltype(z);
      std::vector<std::vector<T>> ins;
      for (size_t i = 0; i < ctx.inputs.size(); ++i) {
        if constexpr (std::is_same_v<T, uint64_t>) ins.push_back(load_wrapping(ctx.in(int(i))));
        else ins.push_back(load_all<T>(ctx.in(int(i))));
      }
      std::vector<T> r(out.numel());
      einsum_kernel(s, ins, shapes, r);
      if constexpr (std::is_same_v<T, uint64_t>) store_wrapping(out, r);
      else store_all(out, r);
    };
    if (is_float(out.dtype())) run(double{});
    else run(uint64_t{});
  };
  d.doc = "Einstein summation; equation in explicit form 'ij,jk->ik' (implicit form and '...' accepted)";
  return d;
}

}  // namespace

void register_einsum_op(OpRegistry& r) { r.add(einsum_op()); }

namespace linalg {

EinsumLoops einsum_loops(const std::string& equation, const std::vector<Shape>& shapes) {
  EinsumSpec s = parse_einsum(equation, shapes);
  const int nl = static_cast<int>(s.size.size()), nin = static_cast<int>(shapes.size());
  // As einsum_kernel: per operand, the stride of each label.
  std::vector<std::vector<int64_t>> stride(nin, std::vector<int64_t>(nl, 0));
  for (int k = 0; k < nin; ++k) {
    std::vector<int64_t> st = strides_of(shapes[k]);
    for (size_t dim = 0; dim < shapes[k].size(); ++dim)
      if (shapes[k][dim] != 1) stride[k][s.in_labels[k][dim]] += st[dim];
  }
  std::vector<bool> is_out(nl, false);
  for (int l : s.out_labels) is_out[l] = true;
  EinsumLoops r;
  r.out_strides.resize(nin);
  r.sum_strides.resize(nin);
  for (int l : s.out_labels) {
    r.out_sizes.push_back(s.size[l]);
    for (int k = 0; k < nin; ++k) r.out_strides[k].push_back(stride[k][l]);
  }
  for (int l = 0; l < nl; ++l)
    if (s.size[l] >= 0 && !is_out[l]) {
      r.sum_sizes.push_back(s.size[l]);
      for (int k = 0; k < nin; ++k) r.sum_strides[k].push_back(stride[k][l]);
    }
  return r;
}

}  // namespace linalg

}  // namespace kiln::ops
