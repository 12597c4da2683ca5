// Section `in-place appends` of a GPU plan with shape profiles
// (docs/plan_format.md, docs/dynamic_shapes.md "KV cache in place"): per KV
// cache pair whose GPU kernels can run on one caller buffer bound in place
// (kiln_context_bind_in_place), the kernel that appends only the new
// positions, launched in place of the concat's own step while the pair is so
// bound, and the symbol whose value is the buffer's capacity
// (plan::InPlaceAppend). The readers of the present (attention with
// k_capacity / v_capacity) take that symbol in their kiln_syms: the runtime
// gives it the bound buffer's capacity, or the present's own length when the
// present is an ordinary output. A plan without such a pair has no section
// and its bytes are what they were.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/plan_format.h"

namespace kiln {
class Graph;
class Node;
}  // namespace kiln

namespace kiln::plan {

// "" when the GPU kernels of a KV cache pair can run on one buffer bound in
// place: only `concat` (marked in_place_append) reads the past, and every
// node reading the present is an attention that steps over its rows by
// `capacity_symbol` (k_capacity / v_capacity; "": any). Else why not, naming the node
// (the compiler then records no append, and the runtime refuses the binding
// with this reason).
std::string why_not_in_place_on_gpu(const Node& concat, const std::string& capacity_symbol);

}  // namespace kiln::plan

namespace kiln::plan::detail {

class Reader;
// u64 count; per pair u32 input, output, axis, the capacity symbol, u32
// concat step, the append step as a section `launches` of one step and its
// launch as a section `generic launches` of one entry (each a u64 length and
// the bytes).
std::vector<uint8_t> write_in_place_appends(const std::vector<InPlaceAppend>& as);
std::vector<InPlaceAppend> read_in_place_appends(Reader r);
// Each pair names a kernel step of the launch list (its concat), an input and
// an output of the graph, a kernel of the plan, bindings inside their
// buffers, and symbols that are `declared` or its own capacity symbol.
void check_in_place_appends(const Plan& p, const std::vector<std::string>& declared, size_t inputs, size_t outputs,
                            std::string_view what);

}  // namespace kiln::plan::detail
