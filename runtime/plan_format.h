// The plan file: everything the runtime needs to run one compiled model,
// independent of the compiler (no ONNX, no NVRTC). Layout (little-endian,
// docs/plan_format.md):
//
//   header   magic "KILNPLAN", format version, header size, file size,
//            section count, xxh64 of the header and section table
//   table    per section: id, offset, size, xxh64 of its bytes
//   sections each at a 256-byte aligned file offset:
//     meta      kiln version, target, precision, archs, whether GPU kernels
//               are present (and if not, the nodes that lack a kernel); since
//               version 2 the minimum CUDA driver its CUBINs and its PTX need
//     graph     the optimized graph as kiln IR text (ir/printer.h); large
//               constants print by reference and live in `weights`
//     weights   every constant of the graph (nested bodies included, in
//               walk_constants order) and every kernel's extra buffer, as
//               raw bytes at 256-byte aligned offsets
//     kernels   per kernel: name, CUDA source, arch, CUBIN, PTX; since
//               version 2 also the CUBINs of more archs (portable plans)
//     launches  the launch list: per step a kernel launch (grid, block,
//               shared bytes, buffer bindings) or a copy
//     memory    the memory plan: arena size, alignment, per node result its
//               storage and offset
//   optional sections (readers that predate one ignore it; plans without it
//   load with its fields unknown):
//     resources what the compiler measured, for `kiln inspect`: the memory
//               plan's live peak, per kernel ptxas's registers, static shared
//               bytes and spill bytes
//     control   (only in plans with control flow) per if/loop/scan node its
//               operands, results and each region's own launch list, which
//               the runtime runs host-driven (runtime/plan_control_run.h)
//     profiles  a plan with symbolic dims (runtime/plan_profiles.h): per
//               profile each dynamic input's min/opt/max shape, and each
//               memory entry's size as a polynomial of the symbols
//     generic launches  a GPU plan with symbolic dims: the launches whose
//               kernels take the symbols' values and whose grids are
//               polynomials of them (runtime/plan_generic_launches.h)
//     in-place appends  a GPU plan with shape profiles and KV cache pairs:
//               per pair the kernel that appends in place and the capacity
//               symbol (runtime/plan_in_place.h)
//     bounded sizes  a GPU plan with data-dependent result sizes, compiled
//               at their bounds: each count's symbol, bound and output, and
//               each output's real shape as polynomials of the counts
//               (runtime/plan_bounded_sizes.h)
//
// Loading checks, before anything is parsed: magic, format version, sizes
// and offsets against the file size, every checksum; every read inside a
// section is bounds-checked. Failures throw kiln::Error naming what is wrong
// with the expected and found values.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/tensor.h"
#include "runtime/plan_bounded_sizes.h"
#include "runtime/plan_generic_launches.h"
#include "runtime/plan_profiles.h"

namespace kiln::plan {

inline constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'L', 'A', 'N'};
// Version 2 added the minimum driver versions (meta) and per kernel the
// CUBINs of more archs (kernels). Version 1 plans still load (the driver
// versions unknown, one CUBIN per kernel).
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kOldestFormatVersion = 1;
inline constexpr uint64_t kAlignment = 256;  // section offsets and weight offsets

struct Meta {
  std::string kiln_version;
  std::string target;              // "cpu" or "sm_XX": what the graph was optimized for
  std::string precision;           // fp32 | tf32 | fp16 | bf16
  std::vector<std::string> archs;  // archs with a CUBIN (empty: no GPU kernels)
  bool gpu_kernels = false;
  std::string no_gpu_reason;  // why not, naming the nodes without a kernel emitter
  // The first `graph_constants` weights are the graph's constants in
  // walk_constants order (runtime/plan_graph.h); the rest are kernel extras.
  uint64_t graph_constants = 0;
  // The oldest CUDA driver (cuDriverGetVersion's encoding: 13000 = 13.0) that
  // loads the plan's CUBINs, and the oldest that JIT-compiles its PTX (the PTX
  // ISA version's CUDA release); 0: not recorded (a version 1 plan).
  int32_t cubin_driver_version = 0;
  int32_t ptx_driver_version = 0;
};

// A CUBIN for one more arch than the kernel's own (a portable plan's sm_90
// next to its sm_80), with what ptxas reported for it.
struct ArchCubin {
  std::string arch;
  std::vector<uint8_t> image;
  int32_t registers = -1, static_shared_bytes = -1, spill_bytes = -1;
};

struct WeightEntry {
  TensorType type;
  uint64_t offset = 0;  // within the weights data area (aligned)
  uint64_t nbytes = 0;
};

struct Kernel {
  std::string name;
  std::string source;  // CUDA C++
  std::string arch;    // the CUBIN's, "sm_90"
  std::vector<uint8_t> cubin;
  std::string ptx;
  // From ptxas (section `resources`); -1: not recorded (an older plan, or
  // ptxas reported no entry function).
  int32_t registers = -1;              // per thread
  int32_t static_shared_bytes = -1;    // per block, besides the launch's dynamic bytes
  int32_t spill_bytes = -1;            // spill stores + spill loads, bytes per thread
  std::vector<ArchCubin> more_cubins;  // CUBINs for other archs (format version 2)
};

// Where a kernel argument's bytes live at run time.
enum class BufferKind : uint8_t {
  Arena = 0,   // the activation arena + offset
  Input = 1,   // graph input `index` + offset
  Output = 2,  // graph output `index` + offset
  Weight = 3,  // weights entry `index` + offset
  // An absent optional operand: the kernel gets a null pointer (its code
  // knows the operand is absent); index, offset, bytes and elements are 0.
  // Plans without absent operands never hold it, so their bytes did not
  // change with it (no format version of its own: a runtime that predates it
  // refuses the plan as having an unknown buffer kind).
  None = 4,
};
struct BufferRef {
  BufferKind kind = BufferKind::Arena;
  uint32_t index = 0;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  int64_t elements = 0;  // element count (the simulator's bounds checks)
};

// Control: an if/loop/scan node, `kernel` indexes Plan::control; the runtime
// reads its condition or trip count on the host and runs its regions' steps.
enum class StepKind : uint8_t { Kernel = 0, Copy = 1, Control = 2 };
struct Dim3 {
  uint32_t x = 0, y = 1, z = 1;
  bool operator==(const Dim3&) const = default;
};
struct Step {
  StepKind kind = StepKind::Kernel;
  uint32_t node = 0;    // position in the graph's node list (messages); copies of outputs: UINT32_MAX
  uint32_t kernel = 0;  // index into kernels (Kernel steps)
  Dim3 grid, block;
  uint32_t shared_bytes = 0;
  std::vector<BufferRef> args;  // kernel parameters in order; Copy: {dst, src}
  // (Kernel) the kernel takes one parameter, a device table of `args`'
  // addresses then their element counts (codegen/param_table.h), built by
  // the runtime. Stored as bit 7 of the step's kind byte, so plans without
  // such a kernel are the bytes they were before it existed.
  bool param_table = false;
};
inline constexpr uint8_t kStepParamTableBit = 0x80;

// A KV cache pair whose GPU kernels can run on one caller buffer bound in
// place (section `in-place appends`, runtime/plan_in_place.h).
struct InPlaceAppend {
  uint32_t input = 0, output = 0;  // the graph input (past) and output (present)
  uint32_t axis = 0;               // the positions appended along
  std::string capacity_symbol;     // its value: the buffer's positions along the axis
  uint32_t concat_step = 0;        // the concat's step in the launch list (run while not bound in place)
  // The append (codegen/emitters/attention/emit_kv_append.h), launched in
  // the concat's place while the pair is bound in place: a kernel step
  // binding (present, new) with its grid at the largest shapes, and its grid
  // and symbols per shape (launch.step = concat_step).
  Step append;
  GenericLaunch launch;
};

// Section `launch variants` (runtime/plan_launch_variants.h): other launches
// for one node of the top-level launch list, run in place of its
// shape-generic ones when the symbols meet every condition: kernels compiled
// for one profile's opt shape (OptShape), or shape-generic kernels with
// another GEMM tile for a range of rows (Bucket).
enum class VariantKind : uint8_t { OptShape = 0, Bucket = 1 };
// Holds when lo <= expr (a polynomial of the symbols) <= hi.
struct ShapeCondition {
  DimPoly expr;
  int64_t lo = 0, hi = 0;
  bool operator==(const ShapeCondition&) const = default;
};
struct LaunchVariant {
  VariantKind kind = VariantKind::OptShape;
  uint32_t profile = 0;           // OptShape: the profile whose opt shape it was compiled for
  uint32_t first = 0, count = 0;  // the top-level steps [first, first + count) it replaces: one node's
  std::vector<ShapeCondition> when;
  std::vector<Step> steps;
  std::vector<GenericLaunch> generic;  // its shape-generic steps (GenericLaunch::step indexes `steps`)
};

// One region of a control-flow node (a branch, a loop or scan body) as a
// launch list of its own: where each of its parameters is read and each of
// its results written (arena slots of its frame, or the node's own operands
// and results, which are bound directly where that is safe).
struct RegionPlan {
  std::vector<BufferRef> params, returns;
  std::vector<Step> steps;  // kernel, copy and nested control steps
};
enum class ControlKind : uint8_t { If = 0, Loop = 1, Scan = 2 };
// An if/loop/scan node (ir/control_flow.h gives the operand and result
// order): its operands and results in the enclosing launch list's buffers,
// with their types (the runtime slices scan inputs and stacks scan outputs),
// and its regions (if: then, else; loop and scan: the body).
struct ControlFlow {
  ControlKind kind = ControlKind::If;
  uint32_t node = 0;             // position in its graph's node list (messages)
  std::vector<uint8_t> present;  // per operand: 0 for an absent optional one (a loop's trip count or condition)
  std::vector<BufferRef> operands, results;
  std::vector<TensorType> operand_types, result_types;
  uint32_t carried = 0;      // loop-carried values / scan states
  uint32_t scan_inputs = 0;  // scan
  uint8_t batched = 0;       // scan: ONNX Scan-8's leading batch dim
  // loop: 1 when the body's condition result is always true (its condition
  // parameter or a constant true): the runtime need not read it per iteration.
  uint8_t cond_always_true = 0;
  std::vector<int64_t> input_axes, input_reverse, output_axes, output_reverse;  // scan
  std::vector<RegionPlan> regions;
};

struct MemoryEntry {
  uint32_t node = 0, result = 0;
  uint8_t storage = 0;  // passes/memory_plan.h Storage as an integer
  int64_t offset = 0, size = 0;
};
struct Memory {
  uint64_t arena_bytes = 0;
  uint64_t alignment = 256;
  std::vector<MemoryEntry> values;
  // Most arena bytes live at one node (section `resources`); -1: not recorded.
  int64_t live_peak_bytes = -1;
  // Arena bytes [zeroed_offset, zeroed_offset + zeroed_bytes) must be zero
  // when a context's arena is created (the runtime zeroes them once); the
  // kernels that use them leave them zero (the tile counters of folded
  // split-K GEMMs, codegen/emitter_table.h NodeKernel::tile_counters), and
  // nothing else of the plan does. 0 bytes: none.
  uint64_t zeroed_offset = 0, zeroed_bytes = 0;
};

struct Plan {
  uint32_t format_version = kFormatVersion;  // the file's (deserialize), else this kiln's
  Meta meta;
  std::string graph_text;
  std::vector<WeightEntry> weights;
  std::vector<uint8_t> weight_data;  // the data area the entries point into
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
  Memory memory;
  // Control-flow nodes (section `control`, written only when not empty, so
  // plans without control flow keep their bytes). A control step's regions
  // name only records after their own (no cycles).
  std::vector<ControlFlow> control;
  ShapeProfiles shapes;  // section `profiles`; empty for a static plan
  // Section `generic launches` (runtime/plan_generic_launches.h): the steps
  // whose kernels are shape-generic; only in a GPU plan with shape profiles.
  std::vector<GenericLaunch> generic_launches;
  // Section `launch variants`: only in a GPU plan with shape profiles where
  // a specialised launch pays (runtime/plan_launch_variants.h).
  std::vector<LaunchVariant> launch_variants;
  // Section `bounded sizes` (runtime/plan_bounded_sizes.h): only in a GPU
  // plan with data-dependent result sizes.
  BoundedSizes bounded_sizes;
  // Section `in-place appends` (runtime/plan_in_place.h): only in a GPU plan
  // with shape profiles whose KV cache pairs can be bound in place.
  std::vector<InPlaceAppend> in_place_appends;
};

// Every step of the plan: the launch list's, then (depth first) those of each
// control-flow region, each with the region path it runs in ("" at the top,
// "control 0 region 1" inside).
struct StepAt {
  const Step* step = nullptr;
  std::string where;
};
std::vector<StepAt> all_steps(const Plan& p);

// Serializes a plan; the same plan gives the same bytes.
std::vector<uint8_t> serialize(const Plan& p);
// The same bytes, handed to `sink` in file order as they are made (a file
// written without an image of it in memory); `file_size_known`, if set, is
// told the total before the first byte.
void write_plan(const Plan& p, const std::function<void(const void*, size_t)>& sink,
                const std::function<void(uint64_t)>& file_size_known = {});

struct LoadOptions {
  // "sm_XX" of the GPU the plan will run on; empty: no GPU (no arch check).
  // A plan with GPU kernels whose CUBIN arch differs and whose PTX cannot be
  // JIT-compiled for it (an older GPU than the PTX's arch) is rejected.
  std::string device_arch;
};

// Parses and checks a plan held in memory. `what` names it in messages (a
// file name). Throws kiln::Error.
Plan deserialize(const uint8_t* data, size_t size, std::string_view what = "plan", const LoadOptions& opts = {});
Plan read_plan_file(const std::string& path, const LoadOptions& opts = {});
void write_plan_file(const std::string& path, const Plan& p);

// How to run the plan's kernels on a GPU of `device_arch` ("sm_86").
struct CodeChoice {
  std::string kind;                // "cubin" or "ptx" (JIT-compiled by the driver)
  std::string arch;                // the CUBINs' arch, or the PTX's
  int32_t min_driver_version = 0;  // what this code needs (0: not recorded)
  std::string describe() const;    // "CUBIN sm_80" / "PTX JIT from sm_80"
};
// A CUBIN of the GPU's arch, else one of the same major arch and an older
// minor (binary compatible, CUDA Programming Guide "Binary Compatibility"),
// else the PTX when the GPU is at least its arch; throws kiln::Error saying
// why none fits.
CodeChoice select_code(const Plan& p, const std::string& device_arch, std::string_view what = "plan");
// The image cuModuleLoadData takes for kernel `k` under `c` (CUBIN bytes or
// the NUL-terminated PTX).
const void* code_image(const Kernel& k, const CodeChoice& c);

// "13.0" for 13000.
std::string driver_version_name(int32_t version);
// The CUDA release whose driver first JIT-compiles PTX ISA major.minor (ISA
// 9.0 -> 13000), from the PTX's `.version` line; 0 when there is none or the
// ISA is not one kiln knows.
int32_t ptx_driver_version(const std::string& ptx);
// Throws kiln::Error naming both versions when `driver_version` (the
// driver's cuDriverGetVersion) is older than what `c` needs.
void check_driver_version(const CodeChoice& c, int32_t driver_version, std::string_view what = "plan");

std::string section_name(uint32_t id);

}  // namespace kiln::plan
