#include "codegen/emitters/misc/emit_tfidf.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "codegen/launch_fit.h"
#include "codegen/core/emit_expr.h"
#include "ir/error.h"
#include "ops/tfidf_vectorizer.h"

namespace kiln::codegen {

TfIdfKernel emit_tfidf_vectorizer(const AttrMap& attrs, const TensorType& x, const TensorType& out) {
  if ((x.dtype != DType::I32 && x.dtype != DType::I64) || x.rank() > 2 || out.dtype != DType::F32)
    fail("codegen: tfidf_vectorizer: input {} / output {}", x.str(), out.str());
  ops::TfIdfSpec s;
  try {
    s = ops::tfidf_spec(attrs);
  } catch (const Error& e) {
    fail("codegen: tfidf_vectorizer: {}", e.what());
  }
  const int64_t C = x.rank() == 0 ? 1 : x.shape.back(), rows = x.rank() == 2 ? x.shape[0] : 1;
  if (out.numel() != rows * s.width) fail("codegen: tfidf_vectorizer: output {} for {} rows", out.str(), rows);
  // The table, n-grams in column order (stable: a column's n-grams keep their order).
  const int64_t G = s.grams(), W = s.width;
  std::vector<int64_t> order(static_cast<size_t>(G));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return s.columns[a] < s.columns[b]; });
  std::vector<int64_t> table(static_cast<size_t>(W + 1), 0);
  for (int64_t g : order) ++table[s.columns[g] + 1];
  std::partial_sum(table.begin(), table.end(), table.begin());
  const int64_t off0 = W + 1, tok0 = W + 2 + G;
  table.push_back(0);
  for (int64_t g : order) table.push_back(table.back() + s.offsets[g + 1] - s.offsets[g]);
  for (int64_t g : order)
    table.insert(table.end(), s.tokens.begin() + s.offsets[g], s.tokens.begin() + s.offsets[g + 1]);
  TfIdfKernel k;
  Tensor t(TensorType(DType::I64, {static_cast<int64_t>(table.size())}));
  std::memcpy(t.raw(), table.data(), table.size() * sizeof(int64_t));
  k.tables.push_back(std::move(t));
  const bool weighted = !s.weights.empty() && s.mode != ops::TfIdfMode::TF;
  SimpleKernel& sk = k.kernel;
  sk.params = {{DType::F32, true, "out"}, {x.dtype, false, "x"}, {DType::I64, false, "tab"}};
  if (weighted) {
    sk.params.push_back({DType::F32, false, "w"});
    k.tables.push_back(Tensor::from(DType::F32, {W}, s.weights));
  }
  const int64_t total = rows * W;
  sk.block = block_threads(256);  // the one decision (codegen/launch_fit.h)
  sk.grid = total == 0 ? 0 : static_cast<unsigned>(std::min<int64_t>((total + sk.block - 1) / sk.block, 4096));
  const char* mode = s.mode == ops::TfIdfMode::TF ? "TF" : s.mode == ops::TfIdfMode::IDF ? "IDF" : "TFIDF";
  std::string b = fmt::format("// tfidf_vectorizer: {} -> {}, {} n-grams, max skip {}, mode {}{}\n", x.str(), out.str(),
                              G, s.max_skip, mode, weighted ? " weighted" : "");
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(sk.params));
  b += grid_stride_loop("e", total);
  b += fmt::format("    const long long col = e % {0}LL, row = e / {0}LL;\n", W);
  b += fmt::format("    const auto r = x + row * {}LL;  // the row's tokens\n", C);
  b += "    long long f = 0;\n";
  b += "    for (long long g = tab[col]; g < tab[col + 1]; ++g) {\n";
  b += fmt::format("      const auto tok = tab + ({}LL + tab[{}LL + g]);  // the n-gram's tokens\n", tok0, off0);
  b += fmt::format("      const long long n = tab[{0}LL + g + 1] - tab[{0}LL + g];\n", off0);
  b += fmt::format("      const long long last_skip = n == 1 ? 1 : {}LL;  // unigrams: no skips\n", s.max_skip + 1);
  b += "      for (long long d = 1; d <= last_skip; ++d)\n";
  b += fmt::format("        for (long long s = 0; s + d * (n - 1) < {}LL; ++s) {{\n", C);
  b += "          long long k = 0;\n";
  b += "          while (k < n && (long long)r[s + k * d] == tok[k]) ++k;\n";
  b += "          f += k == n;\n";
  b += "        }\n    }\n";
  const std::string w = weighted ? "w[col]" : "1.0f";
  switch (s.mode) {
    case ops::TfIdfMode::TF:
      b += "    out[e] = (float)f;\n";
      break;
    case ops::TfIdfMode::IDF:
      b += fmt::format("    out[e] = f > 0 ? {} : 0.0f;\n", w);
      break;
    case ops::TfIdfMode::TFIDF:
      b += fmt::format("    out[e] = {} * (float)f;\n", w);
      break;
  }
  b += "  }\n}\n";
  b += kernel_sim_entry(sk.params);
  std::vector<DType> dts;
  for (const KernelParam& p : sk.params) dts.push_back(p.dtype);
  sk.source = finish_kernel_source("kiln_misc", "tfidf", b, dts, sk.name);
  return k;
}

}  // namespace kiln::codegen
