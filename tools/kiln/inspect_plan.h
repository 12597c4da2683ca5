// `kiln inspect MODEL.plan`: what a compiled plan holds, read through the
// runtime's plan reader (runtime/plan_format.h, runtime/plan_graph.h) with the
// same loading checks the runtime makes: kiln version, target, precision,
// archs; every kernel launch (kernel, node, grid/block, registers, static and
// dynamic shared memory, spills); the memory plan (arena, live peak, every
// result's storage/offset/size); weights; I/O. A plan without GPU kernels
// says so and why. A damaged plan is a kiln::Error (exit 1).
#pragma once
#include <string>

namespace kiln {

struct InspectOptions;

// Prints the report to stdout (and JSON to o.json_path); returns 0.
int run_inspect_plan(const InspectOptions& o);

}  // namespace kiln
