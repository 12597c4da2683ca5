#include "tools/kiln/doctor.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>

#ifdef KILN_HAVE_CODEGEN  // codegen is built (not in sanitizer builds)
#include "codegen/nvrtc/nvrtc_library.h"
#endif
#include "ir/error.h"
#include "runtime/cuda_driver.h"
#include "runtime/plan_format.h"
#include "tools/kiln/output_paths.h"

namespace kiln {

namespace {

struct Gpu {
  int ordinal = 0;
  rt::DeviceIdentity id;
  size_t memory = 0;  // 0: the driver does not say
  std::string error;  // the driver failed to describe it
};

// cuDriverGetVersion's 13000 -> "13.0".
std::string cuda_version(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }

std::vector<Gpu> list_gpus(const rt::CudaDriver& d) {
  std::vector<Gpu> gpus;
  int n = 0;
  if (d.cuDeviceGetCount(&n) != 0) return gpus;
  for (int i = 0; i < n; ++i) {
    Gpu g;
    g.ordinal = i;
    try {
      g.id = rt::device_identity(d, i);
      rt::CUdevice dev = 0;
      if (d.cuDeviceTotalMem && d.cuDeviceGet(&dev, i) == 0 && d.cuDeviceTotalMem(&g.memory, dev) != 0) g.memory = 0;
    } catch (const Error& e) {
      g.error = e.what();
    }
    gpus.push_back(g);
  }
  return gpus;
}

}  // namespace

std::string plan_driver_needs(const plan::Meta& m) {
  auto one = [](int32_t v) { return v > 0 ? "CUDA driver " + plan::driver_version_name(v) + "+" : "not recorded"; };
  return fmt::format("CUBINs {}, PTX {}", one(m.cubin_driver_version), one(m.ptx_driver_version));
}

CLI::App* register_doctor(CLI::App& app, DoctorOptions& o) {
  auto* cmd = app.add_subcommand(
      "doctor",
      "Report the CUDA driver, GPUs and NVRTC kiln finds here and, given a plan, whether it runs on a GPU here "
      "(exit 1 with the reason if not)");
  cmd->add_option("plan", o.plan, "Compiled plan (.plan) to check against this machine")->group("Model");
  cmd->add_option("--json", o.json_path, "Also write the report as JSON")->group("Reporting");
  return cmd;
}

int run_doctor(const DoctorOptions& o) {
  // The plan first: a file that is not a plan is the user's mistake, reported
  // before any probing.
  std::unique_ptr<plan::Plan> p;
  if (!o.plan.empty()) p = std::make_unique<plan::Plan>(plan::read_plan_file(o.plan));

  nlohmann::json j;
  std::string why;
  const rt::CudaDriver* d = rt::cuda_driver(&why);
  std::vector<Gpu> gpus;
  int v = 0;  // the driver's version (0: unknown)
  if (d) {
    std::string version = d->cuDriverGetVersion && d->cuDriverGetVersion(&v) == 0
                              ? fmt::format("CUDA {} ({})", cuda_version(v), v)
                              : "version unknown (no cuDriverGetVersion)";
    std::cout << "CUDA driver: libcuda.so.1, " << version << "\n";
    j["driver"] = {{"found", true}, {"version", v ? nlohmann::json(v) : nlohmann::json()}};
    gpus = list_gpus(*d);
  } else {
    // Not an error here: a machine without a GPU runs plans on the CPU.
    std::cout << "CUDA driver: none usable: " << why << "\n";
    j["driver"] = {{"found", false}, {"error", why}};
  }
  j["gpus"] = nlohmann::json::array();
  if (gpus.empty()) std::cout << "GPUs: none\n";
  for (const Gpu& g : gpus) {
    if (!g.error.empty()) {
      std::cout << fmt::format("GPU {}: cannot be described: {}\n", g.ordinal, g.error);
      j["gpus"].push_back({{"ordinal", g.ordinal}, {"error", g.error}});
      continue;
    }
    std::cout << fmt::format(
        "GPU {}: {}, compute capability {}.{} ({}), {}\n", g.ordinal, g.id.name, g.id.major, g.id.minor, g.id.arch(),
        g.memory ? fmt::format("{:.1f} GiB", double(g.memory) / double(1ull << 30)) : std::string("memory unknown"));
    j["gpus"].push_back({{"ordinal", g.ordinal},
                         {"name", g.id.name},
                         {"compute_capability", fmt::format("{}.{}", g.id.major, g.id.minor)},
                         {"arch", g.id.arch()},
                         {"memory_bytes", g.memory}});
  }
  // NVRTC compiles GPU plans (kiln compile --target sm_XX); running a plan
  // does not need it (CUBIN, or PTX JIT-compiled by the driver).
  std::string nvrtc_why = "this kiln was built without GPU code generation (no CUDA toolkit headers at build time)";
#ifdef KILN_HAVE_CODEGEN
  const bool have_nvrtc = codegen::nvrtc_available(&nvrtc_why);
#else
  const bool have_nvrtc = false;
#endif
  if (have_nvrtc) {
#ifdef KILN_HAVE_CODEGEN
    const codegen::NvrtcLibrary& n = codegen::nvrtc_library();
    std::cout << fmt::format("NVRTC: {}, version {}.{}{}\n", n.path, n.major, n.minor,
                             n.builtins_path.empty() ? "" : ", builtins " + n.builtins_path);
    j["nvrtc"] = {{"found", true},
                  {"path", n.path},
                  {"version", fmt::format("{}.{}", n.major, n.minor)},
                  {"builtins", n.builtins_path}};
#endif
  } else {
    std::cout << "NVRTC: unavailable (kiln compile --target sm_XX needs it; running plans does not): " << nvrtc_why
              << "\n";
    j["nvrtc"] = {{"found", false}, {"error", nvrtc_why}};
  }

  int rc = 0;
  if (p) {
    std::cout << fmt::format(
        "Plan: {} (target {}, {})\n", o.plan, p->meta.target,
        p->meta.gpu_kernels ? fmt::format("{} GPU kernels for {}", p->kernels.size(), fmt::join(p->meta.archs, ","))
                            : "no GPU kernels");
    if (p->meta.gpu_kernels) std::cout << "  needs: " << plan_driver_needs(p->meta) << "\n";
    // The runtime's own choice (runtime/engine.cpp): the first reason that
    // keeps the plan off every GPU here wins.
    std::string cannot;
    nlohmann::json per_gpu = nlohmann::json::array();
    if (!p->meta.gpu_kernels) cannot = "the plan has no GPU kernels (" + p->meta.no_gpu_reason + ")";
    else if (!d) cannot = why;
    else {
      std::vector<std::string> reasons;
      bool any = false;
      for (const Gpu& g : gpus) {
        if (!g.error.empty()) continue;
        try {
          plan::CodeChoice code = plan::select_code(*p, g.id.arch(), o.plan);
          plan::check_driver_version(code, v, o.plan);
          std::cout << fmt::format("  GPU {} ({}): can run ({})\n", g.ordinal, g.id.arch(),
                                   code.kind == "ptx"         ? "PTX JIT-compiled by the driver from " + code.arch
                                   : code.arch == g.id.arch() ? std::string("CUBIN")
                                                              : "CUBIN " + code.arch);
          per_gpu.push_back({{"ordinal", g.ordinal}, {"can_run", true}, {"code", code.kind}, {"code_arch", code.arch}});
          any = true;
        } catch (const Error& e) {
          std::cout << fmt::format("  GPU {} ({}): cannot run: {}\n", g.ordinal, g.id.arch(), e.what());
          per_gpu.push_back({{"ordinal", g.ordinal}, {"can_run", false}, {"reason", e.what()}});
          reasons.push_back(e.what());
        }
      }
      if (!any) cannot = reasons.empty() ? "no GPU could be described" : reasons.front();
    }
    j["plan"] = {{"path", o.plan},         {"target", p->meta.target}, {"gpu_kernels", p->meta.gpu_kernels},
                 {"archs", p->meta.archs}, {"gpus", per_gpu},          {"can_run_on_gpu", cannot.empty()}};
    j["plan"]["cubin_driver_version"] = p->meta.cubin_driver_version;
    j["plan"]["ptx_driver_version"] = p->meta.ptx_driver_version;
    if (cannot.empty()) {
      std::cout << "verdict: the plan can run on a GPU here\n";
    } else {
      j["plan"]["reason"] = cannot;
      std::cout << "verdict: the plan cannot run on a GPU here; kiln would run it on the CPU\n";
      // select_code's messages name the plan already.
      std::cerr << "error: " << (cannot.rfind(o.plan + ":", 0) == 0 ? cannot : o.plan + ": " + cannot) << "\n";
      rc = 1;
    }
  }
  if (!o.json_path.empty()) write_text_file(o.json_path, j.dump(2) + "\n");
  return rc;
}

std::string auto_cpu_warning(const std::string& engine_info, std::string* no_gpu) {
  // kiln_engine_info's CPU sentence is "CPU reference path (REASON)" (kiln.h).
  static const std::string prefix = "CPU reference path (";
  std::string reason = engine_info;
  if (reason.rfind(prefix, 0) == 0 && reason.back() == ')')
    reason = reason.substr(prefix.size(), reason.size() - prefix.size() - 1);
  std::string why;
  if (rt::cuda_driver(&why)) return "warning: a GPU is present but the plan runs on the CPU: " + reason;
  // "no CUDA driver (dlopen ...: ...)" -> "no CUDA driver": the detail is doctor's.
  if (no_gpu) *no_gpu = why.substr(0, why.find(" ("));
  return "";
}

}  // namespace kiln
