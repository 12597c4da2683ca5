// Memory planning: where every node result of a graph lives at run time.
//
// plan_memory() walks the final node order once and decides, per node result:
//   - storage: the activation arena (one device allocation, offsets from
//     plan_memory), the caller's output buffer (graph outputs), or the storage
//     of a graph input / constant (only views can live there);
//   - aliasing: reshape and identity results are views of their operand (same
//     bytes, no kernel); a pointwise op, or a fused node made only of pointwise
//     ops, writes its result into an operand's buffer when that operand (and
//     every view of it) dies at the node and has the result's element count,
//     element size and layout (in-place reuse); likewise a fused node whose
//     body reads that operand only through pointwise ops (an epilogue);
//   - offset: buffers (a value, its views and in-place successors share one)
//     are packed into the arena by an offline "greedy by size, best fit"
//     allocator over live intervals (as TFLite's arena planner and TVM's
//     static memory planner do), at `alignment`-byte offsets.
//
// Liveness is over node positions (0..N-1 in Graph::nodes() order): a value is
// live from its producer to its last user, both inclusive (a node reads its
// operands while writing its results, so they may not share bytes unless the
// node works in place). A result nobody reads is live at its producer only.
// Fused nodes count as one node; the values inside their bodies live in the
// kernel's registers/shared memory and are not planned.
//
// Decisions (see docs/memory_plan.md):
//   - graph inputs and constants are never in the arena (the caller and the
//     weights own them); a view of one stays in its storage, and nothing is
//     ever written in place over one.
//   - graph outputs are not in the arena by default: the runtime binds them to
//     the caller's buffers by name, and the producer writes straight into that
//     buffer. A value whose buffer group holds a graph output (the operand of a
//     final reshape, an in-place predecessor) lives in that output's buffer
//     too. MemoryPlanOptions::outputs_in_arena puts them in the arena instead,
//     live to the end of the graph.
//   - a reshape/identity that cannot be a view (its result is a graph output
//     and its operand is a graph input, a constant or another graph output; a
//     reshape that changes the layout tag) gets its own storage: the runtime
//     materializes it with a copy. ValuePlan::alias_of == nullptr says so.
//   - workspace: a node whose kernels need scratch while it runs (split-K
//     partial sums, MemoryPlanOptions::workspace_bytes) gets arena bytes live
//     at that node only, packed with the values; no value live there shares them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct MemoryPlanOptions {
  int64_t alignment = 256;        // every arena offset is a multiple of this (a power of two)
  bool outputs_in_arena = false;  // place graph outputs in the arena (live to the end) instead of caller buffers
  bool views = true;              // reshape/identity alias their operand
  bool in_place = true;           // pointwise results may overwrite a dying operand
  // Arena bytes node `n` needs as scratch while it runs (its kernels' workspace,
  // codegen/emitter_table.h NodeKernel::workspace_f32); null or 0: none.
  std::function<int64_t(const Node&)> workspace_bytes;
};

enum class Storage {
  Arena,     // the activation arena, at `offset`
  Output,    // the caller's buffer for graph output `output_index`, at `offset` (always 0)
  Input,     // a view of graph input `root` (read-only)
  Constant,  // a view of constant `root` (read-only)
};
std::string_view storage_name(Storage s);

enum class AliasKind {
  None,     // owns its bytes (first value of its buffer)
  View,     // reshape/identity of `alias_of`: the same bytes with another shape
  InPlace,  // written over `alias_of`, which dies at this value's producer
};

struct ValuePlan {
  const Value* value = nullptr;
  Storage storage = Storage::Arena;
  int64_t offset = 0;  // byte offset within its storage
  int64_t size = 0;    // byte size of the value (not rounded up)
  AliasKind alias = AliasKind::None;
  const Value* alias_of = nullptr;  // the operand whose bytes this value reuses
  const Value* root = nullptr;      // the value at the start of the alias chain (itself when alias == None)
  int output_index = -1;            // Storage::Output: the graph output whose buffer holds it
  int buffer = -1;                  // index into MemoryPlan::buffers
  int first = 0, last = 0;          // live range (node positions, inclusive)
};

// A run of bytes shared by a value, its views and its in-place successors.
struct BufferPlan {
  Storage storage = Storage::Arena;
  int64_t offset = 0;
  int64_t size = 0;  // largest member size (they are all equal today)
  int first = 0, last = 0;
  int output_index = -1;
  std::vector<const Value*> members;  // in node order
};

// Scratch bytes of one node in the arena, live at that node only.
struct WorkspacePlan {
  const Node* node = nullptr;
  int position = 0;  // the node's position (its live range is [position, position])
  int64_t offset = 0, size = 0;
};

struct MemoryPlan {
  const Graph* graph = nullptr;
  MemoryPlanOptions options;
  std::vector<ValuePlan> values;  // one per node result, in node order
  std::vector<BufferPlan> buffers;
  std::vector<WorkspacePlan> workspaces;  // in node order
  int64_t arena_bytes = 0;                // arena size (a multiple of the alignment)
  int64_t naive_bytes = 0;                // sum of the sizes of all node results that are not graph outputs
  int64_t live_peak_bytes = 0;            // most bytes of arena buffers live at one node (a lower bound on arena_bytes)
  int in_place = 0, views = 0, view_copies = 0;

  // The plan of a node result; nullptr for inputs, constants and foreign values.
  const ValuePlan* find(const Value* v) const;
  // The workspace of node `n`, or nullptr when it has none.
  const WorkspacePlan* workspace(const Node* n) const;
  // Checks the plan against the graph, independently of how it was made: every
  // node result is planned, sizes and alignment are right, arena values fit in
  // the arena, views and in-place values really alias their operand, nothing
  // is written over a graph input or constant, and no two values whose
  // contents are needed at the same time share bytes (in-place values share
  // with the operand they overwrite only at the node that does it).
  // Throws kiln::Error describing the first violation.
  void validate() const;
  // A human-readable table (one line per value).
  std::string str() const;

  std::unordered_map<const Value*, size_t> index;  // value -> position in `values`
};

MemoryPlan plan_memory(const Graph& g, const MemoryPlanOptions& opts = {});

// Whether `n` is a pointwise op or a fused node made only of pointwise ops.
bool is_pointwise_node(const Node& n);

// Whether result `r` of node `n` may be written over the bytes that n's
// operands `operands` (indices) read, those bytes being dead after n: each
// element i of those operands is read only to compute element i of n's
// results, and the bytes line up (same element count, element size and
// layout as r). True for a pointwise op; for a fused node when each such
// operand flows only through pointwise body ops, to body results of its own
// element count (a GEMM/conv epilogue adding a residual qualifies, the GEMM
// operands do not). The kernel then reads element i before writing it.
bool may_overwrite(const Node& n, const std::vector<int>& operands, const Value* r);

}  // namespace kiln
