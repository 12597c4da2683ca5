// Compiling an .onnx model to a plan from the command line: the plan written
// where asked, and the build times told apart (import, passes, kernels:
// emission and NVRTC, plan). `kiln compile -o` uses it, and so do `kiln run` / `kiln bench` on an .onnx model when they
// build a plan in memory, as trtexec does with --onnx --saveEngine: with a GPU
// --target (the GPU runs plans) or --save-engine. The plan then runs through
// the runtime exactly as `kiln run saved.plan` would run it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/compile_model.h"

namespace CLI {
class App;
}

namespace kiln {

// --save-engine FILE, with -o (what `kiln compile -o` writes: the same plan
// bytes) and trtexec's own spelling --saveEngine. A bare number (0, 1, 2,
// 99) is refused: it is onnxruntime_perf_test's `-o LEVEL`, not a file.
void add_save_engine_flag(CLI::App* cmd, std::string& path);
// The check behind that refusal, also on kiln compile's -o: "" or the message.
std::string refuse_ort_level(const std::string& value);

// Whether `kiln run|bench MODEL.onnx` goes through a plan: the target is a
// GPU's (sm_XX, however --target was given or resolved) or a plan is to be saved.
bool runs_through_plan(const std::string& target, const std::string& save_engine);

// Writes r.plan to `path` and says on stderr how many GPU kernels it holds
// (or why none).
void save_plan(const std::string& path, const CompileResult& r);

// Compiles `model` to a plan in memory (o.write_plan forced on) with the
// messages on stderr, and writes it to `save_path` when that is not empty,
// saying so on stderr as `kiln compile -o` does.
CompileResult compile_to_plan(const ModelSource& model, CompileModelOptions o, const std::string& save_path);
inline CompileResult compile_to_plan(const std::string& model, CompileModelOptions o, const std::string& save_path) {
  return compile_to_plan(ModelSource::file(model), std::move(o), save_path);
}

// "12.3 ms: import 1.0 ms, passes 2.0 ms, kernels 9.0 ms (emitted and NVRTC-compiled), plan 0.3 ms":
// NVRTC's time is never counted as pass time.
std::string build_times(const CompileResult& r);
nlohmann::json build_times_json(const CompileResult& r);

}  // namespace kiln
