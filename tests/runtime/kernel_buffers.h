// What a plan's kernels do with their buffers, for the strict fake driver's
// race detector (fake_cuda_set_kernel_buffers, tests/runtime/fake_cuda/):
// per kernel, whether it takes a pointer table, and per buffer whether it
// may write it (its signature: `KILN_PTR(T)` rather than `KILN_PTR(const T)`,
// codegen::kernel_buffer_writes) and how many bytes it binds (the plan's
// steps). The fake-GPU tests and kiln_fake_gpu_plan_check register every
// plan they run here. Inline functions: one registry per executable.
#pragma once
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "codegen/param_table.h"
#include "runtime/plan_format.h"

namespace kiln::fakegpu {

struct KernelBuffers {
  bool table = false, known = true;
  std::vector<bool> writes;
  std::vector<unsigned long long> bytes;  // the most any step binds
};

inline std::map<std::string, KernelBuffers>& kernel_buffers() {
  static std::map<std::string, KernelBuffers> k;
  return k;
}

inline void note_kernel_buffers(const plan::Plan& p) {
  for (const plan::StepAt& at : plan::all_steps(p)) {  // control-flow regions' launches too
    const plan::Step& s = *at.step;
    if (s.kind != plan::StepKind::Kernel) continue;
    const plan::Kernel& pk = p.kernels.at(s.kernel);
    KernelBuffers& k = kernel_buffers()[pk.name];
    k.table = s.param_table;
    k.writes = codegen::kernel_buffer_writes(pk.source, pk.name);
    // A table whose entries the source does not list one for one: not known.
    k.known = !k.table || k.writes.size() == s.args.size();
    if (k.bytes.size() < s.args.size()) k.bytes.resize(s.args.size(), 0);
    for (size_t i = 0; i < s.args.size(); ++i) k.bytes[i] = std::max<unsigned long long>(k.bytes[i], s.args[i].nbytes);
  }
}

// fake_cuda_set_kernel_buffers' two callbacks.
inline int kernel_table_size(const char* name) {
  auto it = kernel_buffers().find(name);
  if (it == kernel_buffers().end() || !it->second.known) return -1;
  return it->second.table ? static_cast<int>(it->second.writes.size()) : 0;
}
inline int kernel_buffer_use(const char* name, int i, unsigned long long* bytes) {
  auto it = kernel_buffers().find(name);
  if (it == kernel_buffers().end() || !it->second.known || i < 0 || size_t(i) >= it->second.writes.size()) return -1;
  *bytes = size_t(i) < it->second.bytes.size() ? it->second.bytes[size_t(i)] : 0;
  return it->second.writes[size_t(i)] ? 1 : 0;
}

}  // namespace kiln::fakegpu
