#!/usr/bin/env bash
# The GPU checks and figures that matter most, in one command that fits a
# short device lease (15 minutes of device time, one command of at most 10
# minutes; /work/.library/device/README.md). bench/gpu_run_all.sh is the
# complete run; this one runs the same kinds of check at a time budget, each
# lane stopped at its deadline so that what finished comes back:
#
#   bench/gpu_lease.sh OUT_DIR [--budget SECONDS] [--dry-run]
#
# Phase A (correctness, lanes side by side, until 55% of the budget):
#   first     kiln doctor, then tests/runtime/gpu_test.sh (15 node models,
#             sm_90 CUBIN and sm_80 PTX JIT-compiled by the driver)
#   suites    the onnx 1.23 suites (generated here by tools/onnx_suite.py from
#             the machine's onnx package) through `kiln conformance --backend
#             gpu --target sm_90`, in chunks, each with its own JSON
#   models    the five real models (tests/models/prepare_models.py: ONNX
#             Runtime's outputs), fp32 and fp16 on the GPU at the bounds of
#             tests/CMakeLists.txt, then fp16 for --target sm_90a (wgmma)
#   zoo       the model zoo, tests/models/zoo/run_zoo.py gpu-fp32 then gpu-fp16
# Phase B (timing, alone on the GPU, until the budget):
#   perf      bench/perf_vs_model.py: measured per-kernel times beside
#             `kiln inspect --perf` for ResNet-50 and BERT-base (fp16, sm_90)
#   bench     bench/gpu.sh per model (kiln, PyTorch eager, torch.compile in
#             --compile-mode reduce-overhead, batch 1), then its micro benchmarks
# Everything lands in OUT_DIR (one log per lane, JSON per step) and
# OUT_DIR/summary.txt.
#
# --dry-run: on a machine without a GPU, the same lanes against the strict
# fake driver (build/lib/fake_cuda), which runs no arithmetic: every value
# check fails by design and no figure is a GPU figure; it checks the script.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

if [ "${1:-}" = --lane ]; then lane=$2; out=$3; else lane=""; fi

if [ -z "$lane" ]; then
  out=${1:?usage: gpu_lease.sh OUT_DIR [--budget SECONDS] [--dry-run]}
  shift
  budget=540 dry=0
  while (($#)); do
    case $1 in
      --budget) budget=$2; shift 2 ;;
      --dry-run) dry=1; shift ;;
      *) echo "gpu_lease.sh: unknown argument '$1'" >&2; exit 1 ;;
    esac
  done
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  export KILN_LEASE_DRY=$dry
fi

# kiln: the bundle's (bench/device_bundle.sh, carried as .devbundle) or the build's.
if [ -x "$repo/.devbundle/bin/kiln" ]; then kiln=$repo/.devbundle/bin/kiln; else kiln=$repo/build/bin/kiln; fi
py=python3
[ -x "$repo/.venv/bin/python" ] && py=$repo/.venv/bin/python  # this machine; the device has no .venv
export PYTHONUNBUFFERED=1 KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-lease-kernel-cache}
# NVRTC and the CUDA headers of the machine's toolkit when it has one.
if [ -z "${KILN_NVRTC_LIBRARY:-}" ] && [ -f /usr/local/cuda/lib64/libnvrtc.so.13 ]; then
  export KILN_NVRTC_LIBRARY=/usr/local/cuda/lib64/libnvrtc.so.13
fi
if [ -z "${KILN_CUDA_INCLUDE_DIR:-}" ] && [ -f /usr/local/cuda/include/cuda_fp16.h ]; then
  export KILN_CUDA_INCLUDE_DIR=/usr/local/cuda/include
fi
if [ "${KILN_LEASE_DRY:-0}" = 1 ]; then
  export LD_LIBRARY_PATH=$repo/build/lib/fake_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_CUDA_DEVICE=h100
fi
data=/tmp/kiln-lease-data

lane_first() {
  "$kiln" doctor
  KILN_ONNX_TESTDATA=$data/onnx-1.23 "$repo/tests/runtime/gpu_test.sh" "$kiln"
}

lane_suites() {
  local s=$data/onnx-1.23 chunk=0
  [ -d "$s/node" ] || { echo "no suite at $s (the suites lane generates it)"; return 1; }
  # Chunks of 250 tests, each with its own JSON: a chunk stopped at the
  # deadline loses only itself.
  find "$s/node" "$s/pytorch-converted" "$s/pytorch-operator" "$s/simple" -mindepth 1 -maxdepth 1 -type d | sort |
    split -l 250 - "$data/chunk."
  for c in "$data"/chunk.*; do
    chunk=$((chunk + 1))
    # shellcheck disable=SC2046
    "$kiln" conformance $(cat "$c") --backend gpu --target sm_90 -j 12 --timeout 120 -v \
      --json "$out/conformance_gpu_sm90_$chunk.json" || true
  done
}

model_tol() {
  case $1:$2 in
    *:fp32) echo 1e-4,1e-3 ;;
    resnet50:fp16) echo 0.1,0.04 ;;
    mobilenet_v2:fp16) echo 2e-2,8e-3 ;;
    *:fp16) echo 7.5e-3,3e-3 ;;
  esac
}

lane_models() {
  "$py" "$repo/tests/models/prepare_models.py" "$data/models" resnet50 mobilenet_v2 bert_base vit_b_16 gpt2 || return 1
  local m p
  for p in fp32 fp16; do
    for m in resnet50 mobilenet_v2 bert_base vit_b_16 gpt2; do
      echo "== $m $p sm_90"
      "$kiln" conformance "$data/models/$m" --backend gpu --target sm_90 --precision "$p" -j 1 --timeout 300 -v \
        --show-errors --tolerance "$(model_tol "$m" "$p")" || true
    done
  done
  for m in resnet50 bert_base mobilenet_v2 vit_b_16; do
    echo "== $m fp16 sm_90a (wgmma)"
    "$kiln" conformance "$data/models/$m" --backend gpu --target sm_90a --precision fp16 -j 1 --timeout 300 -v \
      --show-errors --tolerance "$(model_tol "$m" fp16)" || true
  done
}

lane_zoo() {
  "$py" "$repo/tests/models/prepare_models.py" --zoo "$data/zoo" > "$out/zoo_prepare.log" 2>&1 || echo "zoo prepare failed (see zoo_prepare.log)"
  local c
  for c in gpu-fp32 gpu-fp16; do
    "$py" "$repo/tests/models/zoo/run_zoo.py" --kiln "$kiln" --zoo "$data/zoo" --config "$c" --jobs 3 \
      --json "$out/zoo_$c.json" || true
  done
}

lane_perf() {
  "$py" "$here/perf_vs_model.py" --kiln "$kiln" --models "$data/models" --out "$out/perf_vs_model.json" \
    --gpu h100 --target sm_90 --precision fp16 resnet50 bert_base
}

lane_bench() {
  local m
  for m in resnet50 bert_base; do
    (cd "$repo" && KILN=$kiln "$py" -m bench.gpubench --models "$m" --batch1-only --no-micro \
      --compile-mode reduce-overhead --out "$out/bench_$m.json") || true
  done
  (cd "$repo" && KILN=$kiln "$py" -m bench.gpubench --models "" --out "$out/bench_micro.json") || true
}

if [ -n "$lane" ]; then
  "lane_$lane"
  exit
fi

# ---- the driver: lanes in their own process groups, stopped at deadlines
t0=$(date +%s)
now() { echo $(( $(date +%s) - t0 )); }
start_lane() {  # start_lane NAME: runs in the background, its own session; echo its pid
  setsid "$0" --lane "$1" "$out" > "$out/$1.log" 2>&1 &
  echo $!
}
stop_at() {  # stop_at DEADLINE PID...: waits for the lanes, kills what still runs at DEADLINE
  local deadline=$1 pid alive
  shift
  while :; do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    if (( $(now) >= deadline )); then
      for pid in "$@"; do kill -TERM -- "-$pid" 2>/dev/null; done
      sleep 3
      for pid in "$@"; do kill -KILL -- "-$pid" 2>/dev/null; done
      echo "stopped at the deadline ($deadline s): lanes still running were killed" >> "$out/summary.txt"
      return 0
    fi
    sleep 2
  done
}

{
  echo "kiln gpu_lease $(date -u +%Y-%m-%dT%H:%M:%SZ), budget $budget s$( ((dry)) && echo ', DRY RUN on the fake driver: no figure is a GPU figure')"
  echo "commit: $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null) kiln: $kiln"
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm,power.draw \
    --format=csv 2>&1 | head -3
  echo "nvrtc: ${KILN_NVRTC_LIBRARY:-kiln's search}; headers: ${KILN_CUDA_INCLUDE_DIR:-the build's}"
  "$py" -c "import torch, onnx, onnxruntime; print('torch', torch.__version__, 'onnx', onnx.__version__, 'ort', onnxruntime.__version__)" 2>&1 | tail -1
} > "$out/summary.txt"
cat "$out/summary.txt"

mkdir -p "$data"
"$py" -W ignore "$repo/tools/onnx_suite.py" "$data/onnx-1.23" > "$out/suite_generate.log" 2>&1 ||
  echo "suite generation failed (suite_generate.log)" | tee -a "$out/summary.txt"

phase_a=$(( budget * 55 / 100 ))
first=$(start_lane first)
suites=$(start_lane suites)
models=$(start_lane models)
zoo=$(start_lane zoo)
stop_at "$phase_a" "$first" "$suites" "$models" "$zoo"
echo "phase A ended at $(now) s" | tee -a "$out/summary.txt"

if ((dry)); then
  echo "bench: not run in a dry run (it times PyTorch on a GPU)" >> "$out/summary.txt"
  perf=$(start_lane perf)
  stop_at "$budget" "$perf"
else
  perf=$(start_lane perf)
  stop_at $(( phase_a + (budget - phase_a) / 4 )) "$perf"
  bench=$(start_lane bench)
  stop_at "$budget" "$bench"
fi
echo "phase B ended at $(now) s" | tee -a "$out/summary.txt"

# The short table the reply's tail carries.
{
  echo "== first"; grep -E "^(FAIL|skipped|backend|ok|GPU|compute)|passed|gpu_test" "$out/first.log" | tail -8
  echo "== suites"; grep -E "^\S+ \[gpu\]:" "$out/suites.log" | tail -8
  echo "== models"; grep -E "^== |\[gpu\]:" "$out/models.log" | paste - - | sed 's/\t/ /' | tail -16
  echo "== zoo"; grep -E "^zoo \[" "$out/zoo.log"
  echo "== perf"; grep -E "modelled .* measured" "$out/perf.log"
  echo "== bench"; grep -E "batch 1: kiln|^failed" "$out/bench.log" 2>/dev/null | tail -4
} > "$out/table.txt" 2>&1
cat "$out/table.txt" >> "$out/summary.txt"
echo
cat "$out/table.txt"
