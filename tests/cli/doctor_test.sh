#!/bin/sh
# kiln doctor [PLAN] (docs/cli.md): the driver, GPUs and NVRTC it finds, and
# whether a plan runs on a GPU here, against the fake CUDA driver
# (FAKE_DIR/libcuda.so.1 through LD_LIBRARY_PATH; FAKE_CUDA_DEVICE picks the GPU):
#  - no driver at all: exit 0, "CUDA driver: none" (a CPU machine is fine);
#  - an H100 (cc 9.0) and an sm_90 plan: exit 0, "can run (CUBIN)", the
#    driver's version (cuDriverGetVersion) and the GPU's memory;
#  - an A100 (cc 8.0) and the sm_90 plan: exit 1 naming both archs;
#  - a CPU-only plan with a GPU present: exit 1, "no GPU kernels";
#  - a file that is not a plan: exit 1 naming it.
# Usage: doctor_test.sh KILN MODEL_DIR FAKE_DIR
set -u
kiln=$1
model=$2/small.onnx
fake=$3
. "$(dirname "$0")/lib.sh"
has() { grep -q "$2" "$1" || fail "$1 lacks '$2'"; }

# sm_90 kernels need NVRTC: without it there is no GPU plan to check.
if ! "$kiln" compile "$model" --target sm_90 -o "$dir/gpu.plan" >"$out" 2>&1; then
  grep -q "NVRTC" "$out" && { echo "SKIP: no NVRTC"; exit 77; }
  fail "compile --target sm_90"
fi
"$kiln" compile "$model" --target cpu -o "$dir/cpu.plan" >"$out" 2>&1 || fail "compile (cpu)"

# No driver: LD_LIBRARY_PATH points nowhere useful, and a machine with a
# real libcuda is not this case.
if ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1"; then
  "$kiln" doctor >"$out" 2>"$err"; rc=$?
  [ $rc -eq 0 ] || fail "no driver: exit $rc, expected 0"
  has "$out" "^CUDA driver: none usable: no CUDA driver (dlopen libcuda.so.1"
  has "$out" "^GPUs: none"
  grep -Eq "^NVRTC: (.*libnvrtc.*, version [0-9]+\.[0-9]+|unavailable)" "$out" || fail "no NVRTC line"
fi

FAKE_CUDA_DEVICE=h100 LD_LIBRARY_PATH=$fake "$kiln" doctor "$dir/gpu.plan" --json "$dir/d.json" >"$out" 2>"$err"
rc=$?
[ $rc -eq 0 ] || fail "H100 + sm_90 plan: exit $rc, expected 0"
has "$out" "^CUDA driver: libcuda.so.1, CUDA 13.0 (13000)"
has "$out" "^GPU 0: NVIDIA H100 80GB HBM3, compute capability 9.0 (sm_90), 80.0 GiB"
has "$out" "GPU 0 (sm_90): can run (CUBIN)"
has "$out" "^verdict: the plan can run on a GPU here"
python3 - "$dir/d.json" <<'PY' || fail "--json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["driver"] == {"found": True, "version": 13000}, d["driver"]
assert d["gpus"][0]["arch"] == "sm_90" and d["gpus"][0]["memory_bytes"] == 80 << 30, d["gpus"]
assert d["plan"]["can_run_on_gpu"] is True and d["plan"]["gpus"][0]["code"] == "cubin", d["plan"]
PY

FAKE_CUDA_DEVICE=a100 FAKE_CUDA_DRIVER_VERSION=12080 LD_LIBRARY_PATH=$fake "$kiln" doctor "$dir/gpu.plan" >"$out" 2>"$err"
rc=$?
[ $rc -eq 1 ] || fail "A100 + sm_90 plan: exit $rc, expected 1"
has "$out" "^CUDA driver: libcuda.so.1, CUDA 12.8 (12080)"
has "$out" "^GPU 0: NVIDIA A100-SXM4-80GB, compute capability 8.0 (sm_80)"
has "$err" "^error: .*gpu.plan: wrong GPU arch: the plan's kernels are for sm_90, this GPU is sm_80"

FAKE_CUDA_DEVICE=h100 LD_LIBRARY_PATH=$fake "$kiln" doctor "$dir/cpu.plan" >"$out" 2>"$err"
rc=$?
[ $rc -eq 1 ] || fail "CPU-only plan: exit $rc, expected 1"
has "$err" "^error: .*cpu.plan: the plan has no GPU kernels"

"$kiln" doctor "$model" >"$out" 2>"$err"
rc=$?
[ $rc -eq 1 ] || fail "not a plan: exit $rc, expected 1"
has "$err" "^error: .*small.onnx: not a kiln plan"
echo PASS
