#include "compiler/targets.h"

#include <algorithm>

#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/cuda_driver.h"

namespace kiln {

namespace {

// The GPU archs kiln has kernels (and launch limits) for. sm_90a: Hopper's
// arch-specific target (CUBINs for sm_90 devices only), the opt-in for the
// wgmma GEMM kernels (codegen/emitters/gemm_conv/gemm_tiles_wgmma.h); never what
// "auto" resolves to.
const std::vector<std::string>& gpu_archs() {
  static const std::vector<std::string> a{"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
  return a;
}

}  // namespace

const std::vector<std::string>& supported_targets() {
  static const std::vector<std::string> t = [] {
    std::vector<std::string> v{kTargetAuto, "cpu", kTargetPortable};
    v.insert(v.end(), gpu_archs().begin(), gpu_archs().end());
    return v;
  }();
  return t;
}

const std::vector<std::string>& supported_precisions() {
  static const std::vector<std::string> p{"fp32", "tf32", "fp16", "bf16"};
  return p;
}

// sm_80's CUBIN also runs on sm_86 and sm_89 (same major, newer minor:
// "Binary Compatibility" in the CUDA Programming Guide); sm_90's on Hopper;
// sm_80's PTX is JIT-compiled by the driver on anything newer.
const std::vector<std::string>& portable_archs() {
  static const std::vector<std::string> a{"sm_80", "sm_90"};
  return a;
}

std::vector<std::string> target_archs(const std::string& target) {
  if (target == "cpu") return {};
  if (target == kTargetPortable) return portable_archs();
  if (std::find(gpu_archs().begin(), gpu_archs().end(), target) != gpu_archs().end()) return {target};
  fail("target \"{}\" names no GPU arch (resolve \"auto\" first; expected one of {})", target,
       fmt::join(supported_targets(), ", "));
}

std::vector<std::string> archs_running_target(const std::string& target) {
  std::vector<std::string> own = target_archs(target);
  if (own.empty()) return {};
  if (target == "sm_90a") return {"sm_90a"};  // arch-specific: that arch (sm_90 devices) alone
  // sm_XY -> XY; the oldest arch whose code the plan carries bounds the rest
  // (a portable plan's sm_80 CUBIN and PTX run everywhere).
  auto number = [](const std::string& arch) { return std::stoi(arch.substr(3)); };
  int oldest = number(own.front());
  for (const std::string& a : own) oldest = std::min(oldest, number(a));
  std::vector<std::string> r;
  for (const std::string& a : gpu_archs())
    if (number(a) >= oldest && a.back() != 'a') r.push_back(a);  // an arch-specific target only when named
  return r;
}

bool is_gpu_target(const std::string& target) {
  return target == kTargetAuto || !target_archs(target).empty();  // auto never resolves to cpu
}

namespace {

void check_member(const char* what, const std::string& v, const std::vector<std::string>& ok) {
  if (std::find(ok.begin(), ok.end(), v) == ok.end())
    fail("{} \"{}\": expected one of {}", what, v, fmt::join(ok, ", "));
}

}  // namespace

void check_target(const std::string& target) { check_member("target", target, supported_targets()); }
void check_precision(const std::string& precision) { check_member("precision", precision, supported_precisions()); }

LocalGpu detect_local_gpu() {
  LocalGpu g;
  const rt::CudaDriver* d = rt::cuda_driver(&g.why);
  if (!d) return g;
  int count = 0;
  if (d->cuDeviceGetCount(&count) != 0 || count < 1) {
    g.why = "the CUDA driver reports no device";
    return g;
  }
  try {
    rt::DeviceIdentity id = rt::device_identity(*d, 0);
    g.present = true;
    g.name = id.name;
    g.arch = id.arch();
  } catch (const Error& e) {
    g.why = e.what();
  }
  return g;
}

ResolvedTarget resolve_target(const std::string& requested) {
  if (requested != kTargetAuto) return resolve_target(requested, LocalGpu{});
  return resolve_target(requested, detect_local_gpu());
}

ResolvedTarget resolve_target(const std::string& requested, const LocalGpu& gpu) {
  check_target(requested);
  if (requested != kTargetAuto) return {requested, ""};
  std::string portable =
      fmt::format("a portable GPU plan (CUBINs for {}, PTX for newer GPUs)", fmt::join(portable_archs(), " and "));
  if (!gpu.present) return {kTargetPortable, fmt::format("target auto: no local GPU ({}): {}", gpu.why, portable)};
  if (std::find(gpu_archs().begin(), gpu_archs().end(), gpu.arch) != gpu_archs().end())
    return {gpu.arch, fmt::format("target auto: the local GPU, {} ({})", gpu.name, gpu.arch)};
  return {kTargetPortable, fmt::format("target auto: the local GPU, {} ({}), is not an arch kiln builds CUBINs for: {}",
                                       gpu.name, gpu.arch, portable)};
}

}  // namespace kiln
