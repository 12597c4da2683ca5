// The KV cache pairs of a GPU plan with shape profiles that can be bound in
// place (section `in-place appends`, runtime/plan_in_place.h): per concat
// that passes/kv_cache_in_place.cpp marked, the kernel appending only the new
// positions (codegen/emitters/attention/emit_kv_append.h), compiled for the
// plan's archs beside its other kernels. Internal to the plan builder.
#pragma once
#ifdef KILN_HAVE_CODEGEN
#include <string>
#include <vector>

#include "codegen/nvrtc/nvrtc_compiler.h"
#include "compiler/plan_frames.h"

namespace kiln::planbuild {

// `g`: the graph at its largest shapes whose launch list b.p.steps holds;
// `compiled[a]`: the kernels of b.sources compiled for archs[a], to which the
// appends' kernels are added (and to b.sources, b.launched). A pair whose
// past or present another node reads densely gets none
// (plan::why_not_in_place_on_gpu): the runtime refuses to bind it in place.
void add_in_place_appends(const Graph& g, Builder& b, const std::vector<std::string>& archs,
                          std::vector<std::vector<codegen::CompiledKernel>>& compiled);

}  // namespace kiln::planbuild
#endif
