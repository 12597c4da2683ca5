// embed: loads a kiln plan, fills every input with a fixed ramp, runs it and
// prints the outputs. Usage: embed MODEL.plan
// Build against an installed kiln: see CMakeLists.txt and docs/embedding.md.
#include <kiln/kiln.hpp>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

std::string type_str(const kiln::TensorInfo& t) {
  std::string s = std::string(kiln_dtype_name(t.dtype)) + "[";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.plan\n", argv[0]);
    return 2;
  }
  try {
    // The engine: immutable, shareable between threads. AUTO picks the GPU
    // when the plan has kernels for it and a driver and device exist.
    kiln::Engine engine = kiln::Engine::from_file(argv[1], KILN_BACKEND_AUTO);
    std::printf("engine: %s\n", engine.info().c_str());

    // One context per thread (or CUDA stream); buffers are bound by name.
    kiln::Context ctx(engine);
    std::vector<std::vector<unsigned char>> inputs, outputs;
    for (const kiln::TensorInfo& in : engine.inputs()) {
      std::printf("input \"%s\": %s\n", in.name.c_str(), type_str(in).c_str());
      std::vector<unsigned char> bytes(in.nbytes(), 0);
      if (in.dtype == KILN_F32) {
        auto* f = reinterpret_cast<float*>(bytes.data());
        for (int64_t i = 0; i < in.numel(); ++i) f[i] = float(i % 17 - 8) / 8.0f;  // the ramp
      }
      inputs.push_back(std::move(bytes));
      ctx.bind_input(in.name, inputs.back().data(), in.dtype, in.shape);
    }
    for (const kiln::TensorInfo& out : engine.outputs()) {
      outputs.emplace_back(out.nbytes());
      ctx.bind_output(out.name, outputs.back().data(), out.dtype, out.shape);
    }

    ctx.run();  // synchronous; ctx.enqueue(stream) for a CUDA stream on a GPU engine

    std::vector<kiln::TensorInfo> outs = engine.outputs();
    for (size_t o = 0; o < outs.size(); ++o) {
      std::printf("output \"%s\": %s\n%s:", outs[o].name.c_str(), type_str(outs[o]).c_str(), outs[o].name.c_str());
      if (outs[o].dtype != KILN_F32) {
        std::printf(" (%lld elements, not f32)\n", static_cast<long long>(outs[o].numel()));
        continue;
      }
      const auto* f = reinterpret_cast<const float*>(outputs[o].data());
      for (int64_t i = 0; i < outs[o].numel() && i < 16; ++i) std::printf(" %.6g", f[i]);
      std::printf("%s\n", outs[o].numel() > 16 ? " ..." : "");
    }
  } catch (const kiln::runtime_error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
