#include "codegen/param_table.h"

#include <cctype>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/launch_fit.h"
#include "ir/error.h"
#include "ir/graph.h"

namespace kiln::codegen {

namespace {

struct BufferParam {
  std::string type;  // T of KILN_PTR(T)
  std::string name;
};

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether `name` occurs in `text` as a whole token after `.` or `->` (a member
// the macro would replace).
bool used_as_member(const std::string& text, const std::string& name) {
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    if (at + name.size() < text.size() && is_ident(text[at + name.size()])) continue;
    if (at > 0 && is_ident(text[at - 1])) continue;
    size_t before = text.find_last_not_of(" \t\r\n", at == 0 ? 0 : at - 1);
    if (at == 0 || before == std::string::npos) continue;
    if (text[before] == '.' || (text[before] == '>' && before > 0 && text[before - 1] == '-')) return true;
  }
  return false;
}

// The simulator entry the emitters write after the kernel
// (codegen/core/kernel_params.h's kernel_sim_entry and its hand-written
// twins): `#ifdef KILN_SIM\nextern "C" int NAME_sim(` ... `#endif\n`.
void erase_sim_entry(std::string& src, const std::string& name) {
  const std::string head = "#ifdef KILN_SIM\nextern \"C\" int " + name + "_sim(";
  const size_t at = src.find(head);
  const size_t end = at == std::string::npos ? at : src.find("#endif\n", at);
  if (end == std::string::npos)
    fail("kernel {}: its simulator entry is not in the form `{}...#endif`, so it cannot take a pointer table", name,
         head);
  src.erase(at, end + 7 - at);
}

}  // namespace

bool use_param_table_if_needed(NodeKernel& k, long long max_param_bytes) {
  const KernelSignature sig = kernel_signature(k.source, k.name);
  if (sig.open == std::string::npos) return false;  // LaunchBounder::apply says so
  const long long n = static_cast<long long>(sig.params.size());
  // Pointers take 8 bytes each; a shape-generic kernel's by-value kiln_syms its struct's size.
  const long long bytes = kernel_param_bytes(k.source, k.name);
  if (bytes <= max_param_bytes) return false;
  std::vector<BufferParam> params;
  for (const std::string& p : sig.params) {
    if (p.rfind("kiln_syms", 0) == 0)
      fail(
          "kernel {}: {} bytes of parameters need a pointer table, which a shape-generic kernel (taking `{}`) "
          "cannot use (why_not_shape_generic refuses such a node before its kernel is built)",
          k.name, bytes, p);
    // KILN_PTR(T) name
    const size_t close = p.rfind(')');
    if (p.rfind("KILN_PTR(", 0) != 0 || close == std::string::npos)
      fail("kernel {}: parameter `{}` is not a buffer (KILN_PTR(T) name); {} parameters need a pointer table", k.name,
           p, n);
    BufferParam b{p.substr(9, close - 9), p.substr(close + 1)};
    b.name.erase(0, b.name.find_first_not_of(" \t\r\n"));
    if (b.name.empty()) fail("kernel {}: parameter `{}` has no name", k.name, p);
    params.push_back(b);
  }
  // The kernel's body: from the `{` after the parameter list to its match.
  const size_t open_brace = k.source.find('{', sig.close);
  if (open_brace == std::string::npos) fail("kernel {}: no body after its signature", k.name);
  size_t end = open_brace;
  for (int depth = 0; end < k.source.size(); ++end) {
    if (k.source[end] == '{') ++depth;
    if (k.source[end] == '}' && --depth == 0) break;
  }
  if (end >= k.source.size()) fail("kernel {}: its body's braces do not match", k.name);
  const std::string body = k.source.substr(open_brace, end + 1 - open_brace);
  for (const BufferParam& b : params)
    if (used_as_member(body, b.name))
      fail("kernel {}: its body uses the name of parameter `{}` as a member, so it cannot take a pointer table", k.name,
           b.name);

  std::string defines =
      "#ifndef KILN_PARAM_TABLE_ENTRY\n"
      "#ifdef KILN_SIM\n"
      "#define KILN_PARAM_TABLE_ENTRY(T, i, n, name) \\\n"
      "  ::kiln::sim::Ptr<T>(reinterpret_cast<T*>(kiln_param_table[i]), "
      "static_cast<long long>(kiln_param_table[(n) + (i)]), name)\n"
      "#else\n"
      "#define KILN_PARAM_TABLE_ENTRY(T, i, n, name) (reinterpret_cast<T*>(kiln_param_table[i]))\n"
      "#endif\n"
      "#endif\n"
      "// The buffers come from a table in device memory (codegen/param_table.h).\n";
  std::string undefs;
  for (size_t i = 0; i < params.size(); ++i) {
    defines += fmt::format("#define {} KILN_PARAM_TABLE_ENTRY({}, {}, {}, \"{}\")\n", params[i].name, params[i].type, i,
                           n, params[i].name);
    undefs += fmt::format("#undef {}\n", params[i].name);
  }
  std::string src = k.source;
  // Back to front, so the positions found above stay valid.
  src.insert(end + 1, "\n" + undefs);
  src.replace(sig.open + 1, sig.close - sig.open - 1, "KILN_PTR(const unsigned long long) kiln_param_table");
  const size_t line = src.rfind('\n', sig.global);
  src.insert(line == std::string::npos ? 0 : line + 1, defines);
  erase_sim_entry(src, k.name);
  src += fmt::format(
      "#ifdef KILN_SIM\n"
      "extern \"C\" int {0}_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, const long long* counts, "
      "std::string* error) {{\n"
      "  try {{\n"
      "    ::kiln::sim::launch(*cfg, {0}, ::kiln::sim::arg(static_cast<const unsigned long long*>(buffers[0]), "
      "counts[0], \"kiln_param_table\"));\n"
      "    return 0;\n"
      "  }} catch (const ::kiln::sim::SimError& ex) {{\n    *error = ex.what();\n    return 1;\n"
      "  }} catch (const std::exception& ex) {{\n    *error = ex.what();\n    return 2;\n  }}\n}}\n#endif\n",
      k.name);
  k.source = std::move(src);
  k.param_table = true;
  return true;
}

std::vector<bool> kernel_buffer_writes(const std::string& source, const std::string& name) {
  const KernelSignature sig = kernel_signature(source, name);
  std::vector<bool> writes;
  if (sig.open == std::string::npos) return writes;
  // `KILN_PTR(T)`: through a const T only reads are possible.
  auto writable = [](std::string_view type) { return type.rfind("const ", 0) != 0; };
  if (sig.params.size() == 1 && sig.params[0] == "KILN_PTR(const unsigned long long) kiln_param_table") {
    // The entries as use_param_table_if_needed defines them, in table order.
    static constexpr std::string_view kEntry = " KILN_PARAM_TABLE_ENTRY(";
    for (size_t at = source.find("#define "); at != std::string::npos && at < sig.global;
         at = source.find("#define ", at + 1)) {
      const size_t eol = source.find('\n', at);
      const std::string line = source.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
      const size_t entry = line.find(kEntry);
      if (entry == std::string::npos || line.find("(T, i, n, name)") != std::string::npos) continue;
      writes.push_back(writable(std::string_view(line).substr(entry + kEntry.size())));
    }
    return writes;
  }
  for (const std::string& p : sig.params)
    writes.push_back(p.rfind("KILN_PTR(", 0) != 0 || writable(std::string_view(p).substr(9)));
  return writes;
}

namespace {

// An upper bound of the buffers one kernel of `n` takes: its results, its
// operands, the body constants a fused node passes as buffers, and the
// scratch and tile counters an emitter may bind after them.
long long buffer_bound(const Node& n) {
  long long bound = n.num_outputs() + n.num_inputs() + 2;
  if (n.body())
    for (const auto& bn : n.body()->nodes())
      for (const Value* v : bn->inputs()) bound += v && v->has_data();
  return bound;
}

}  // namespace

// Decided where the fuser asks about a group (why_not_shape_generic), not at
// kernel build after the group is formed; past the bound the answer is the
// emitted kernels' own signatures.
std::string why_generic_kernel_needs_param_table(const Node& n, const KernelEmitter& e) {
  if (buffer_bound(n) * 8 + kKilnSymsBytes <= kMaxParamBytes) return "";
  std::vector<NodeKernel> ks;
  try {
    ks = e.emit(n);
  } catch (const Error&) {
    return "";  // refused for another reason: why_no_kernel names it
  }
  for (const NodeKernel& k : ks) {
    const int params = kernel_param_count(k.source, k.name);
    if (params < 0 || !k.shape_generic()) continue;
    const long long bytes = (params - 1) * 8LL + kKilnSymsBytes;
    if (bytes > kMaxParamBytes)
      return fmt::format(
          "its shape-generic kernel would need a pointer table ({} buffers and the {}-byte kiln_syms: {} bytes of "
          "parameters, more than {}), which a kernel taking symbolic sizes cannot use",
          params - 1, kKilnSymsBytes, bytes, kMaxParamBytes);
  }
  return "";
}

}  // namespace kiln::codegen
