#!/usr/bin/env bash
# The first GPU run in one command (issue 14 item 5), for a GPU machine with a
# CUDA 13 driver and PyTorch but no package registry and little GPU time:
#
#   bench/gpu_run_all.sh [--dry-run] [--out DIR] [--jobs N] [--suites LIST] [--models LIST] [--skip-bench]
#
# Steps, each timed, logged and summarised; a failing step does not stop the
# others (the GPU time is spent once):
#   1 doctor       kiln doctor: driver, GPU, compute capability, NVRTC
#   2 gpu_tests    what `ctest -L gpu` runs (tests/runtime/gpu_test.sh)
#   3 conformance  every ONNX conformance test (Debian's libonnx-testdata)
#                  compiled for the GPU's arch, run with --backend gpu and with
#                  --backend ref on the same seeded inputs, outputs compared
#   4 models       the five real models (fp32 and fp16 plans), likewise
#   5 wgmma        on a Hopper GPU (sm_90) only: the fp16 models again for
#                  --target sm_90a, the opt-in wgmma GEMM kernels
#                  (docs/codegen.md, "wgmma GEMM (sm_90a)"), against the
#                  reference as in step 4 (models_sm90a.tsv): the validation
#                  the opt-in waits for
#   6 bench        bench/gpu.sh: kiln against PyTorch
# Everything goes to bench/results/<date>-<gpu>/ (or --out): one log per
# step, conformance.tsv / models.tsv (one line per test), the JSON of
# bench/gpu.sh, summary.txt and summary.json (each step's status and seconds).
#
# It runs from the repository (build/bin/kiln, or .devbundle/ when present)
# or from a bundle made by bench/device_bundle.sh, which needs no build tree
# and no Debian package.
#
# --dry-run: the same steps on a machine without a GPU, against the strict
# fake driver (tests/runtime/fake_cuda: module images, per-launch limits,
# stream capture, sticky errors). The fake runs no kernel arithmetic, so
# values are not compared, the GPU test script and the benchmark (which need
# a GPU's results) are reported as not run, and the results go to
# $TMPDIR/kiln-gpu-run-all-dry-run-<date>/ (never bench/results): every file
# says that it is a dry run. The step passes when every plan loads, launches
# and replays on the fake driver.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dry=0 out="" jobs="" suites="node pytorch-converted pytorch-operator simple real" model_names="" skip_bench=0
while (($#)); do
  case $1 in
    --dry-run) dry=1; shift ;;
    --out) out=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --suites) suites=${2//,/ }; shift 2 ;;
    --models) model_names=${2//,/ }; shift 2 ;;
    --skip-bench) skip_bench=1; shift ;;
    -h|--help) sed -n '2,36p' "$0"; exit 0 ;;
    *) echo "gpu_run_all.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done

# Where things are: a bundle (this script beside bin/kiln) or the repository.
if [ -x "$here/bin/kiln" ]; then
  bundle=$here
  repo=$(cd "$here/.." && pwd)
  [ -d "$repo/bench/results" ] || repo=""
else
  repo=$(cd "$here/.." && pwd)
  bundle=""
  [ -x "$repo/.devbundle/bin/kiln" ] && bundle=$repo/.devbundle
fi
if [ -n "$bundle" ]; then
  kiln=$bundle/bin/kiln
  fake_dir=$bundle/fake_cuda
  gpu_test=$bundle/bench/gpu_test.sh
  bench_root=$bundle
  skeletons=$bundle/models
else
  kiln=$repo/build/bin/kiln
  fake_dir=$repo/build/lib/fake_cuda
  gpu_test=$repo/tests/runtime/gpu_test.sh
  bench_root=$repo
  skeletons=$repo/tests/models
fi
[ -x "$kiln" ] || { echo "gpu_run_all.sh: no kiln ($kiln): build it, or make a bundle (bench/device_bundle.sh)" >&2; exit 1; }
jobs=${jobs:-$(( $(nproc) < 8 ? $(nproc) : 8 ))}
py=""
for p in python3 python; do
  if command -v "$p" >/dev/null && "$p" -c "import numpy" 2>/dev/null; then py=$(command -v "$p"); break; fi
done

# NVRTC and the CUDA headers: the bundle's, else the machine's (the toolkit,
# or the nvidia-cuda-nvrtc / nvidia-cuda-runtime wheels next to PyTorch).
if [ -n "$bundle" ] && [ -f "$bundle/nvrtc/lib/libnvrtc.so.13" ]; then
  export KILN_NVRTC_LIBRARY=$bundle/nvrtc/lib/libnvrtc.so.13 KILN_CUDA_INCLUDE_DIR=$bundle/nvrtc/include
  # NVRTC loads libnvrtc-builtins.so.13.0 by name.
  export LD_LIBRARY_PATH=$bundle/nvrtc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
elif [ -n "$py" ] && [ -z "${KILN_NVRTC_LIBRARY:-}" ]; then
  wheel=$("$py" -c "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], 'cu13'))" 2>/dev/null || true)
  if [ -n "$wheel" ] && [ -f "$wheel/lib/libnvrtc.so.13" ]; then
    export KILN_NVRTC_LIBRARY=$wheel/lib/libnvrtc.so.13 LD_LIBRARY_PATH=$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  if [ -z "${KILN_CUDA_INCLUDE_DIR:-}" ] && [ ! -f /usr/local/cuda/include/cuda_fp16.h ] && [ -n "$wheel" ] &&
     [ -f "$wheel/include/cuda_fp16.h" ]; then
    export KILN_CUDA_INCLUDE_DIR=$wheel/include
  fi
fi

# The GPU: the real one, or the fake driver with an H100's limits.
if ((dry)); then
  [ -f "$fake_dir/libcuda.so.1" ] || { echo "gpu_run_all.sh: --dry-run needs the fake driver ($fake_dir/libcuda.so.1)" >&2; exit 1; }
  export LD_LIBRARY_PATH=$fake_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export FAKE_CUDA_DEVICE=h100 FAKE_CUDA_NAME="kiln fake driver (dry run, H100 limits)"
  gpu_slug=dry-run arch=sm_90
else
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 || true)
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
  if [ -z "$cc" ]; then
    echo "gpu_run_all.sh: no GPU here (nvidia-smi reports none). On a machine without a GPU, use --dry-run." >&2
    exit 1
  fi
  arch=sm_${cc/./}
  case $arch in sm_80|sm_86|sm_89|sm_90) ;; sm_9*|sm_1*) arch=sm_90 ;; *) arch=sm_80 ;; esac
  gpu_slug=$(echo "$name" | tr 'A-Z' 'a-z' | grep -o 'h100\|h200\|a100\|l4\|b200\|gh200' | head -1 || true)
  gpu_slug=${gpu_slug:-$(echo "$name" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')}
fi
stamp=$(date -u +%Y-%m-%d)
if [ -z "$out" ]; then
  if ((dry)); then out=${TMPDIR:-/tmp}/kiln-gpu-run-all-dry-run-$stamp
  elif [ -n "$repo" ]; then out=$repo/bench/results/$stamp-$gpu_slug
  else out=$here/results/$stamp-$gpu_slug; fi
fi
if ((dry)) && [[ $(readlink -m "$out") == */bench/results* ]]; then
  echo "gpu_run_all.sh: a dry run writes no file under bench/results ($out): its figures are not GPU figures" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$work/kernel-cache}
mode=$( ((dry)) && echo "DRY RUN on the fake driver: no figure here is a GPU figure" || echo "GPU run")
banner="kiln gpu_run_all: $mode; kiln $kiln; arch $arch; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "$banner"
echo "results: $out"

steps=()  # name|status|seconds|detail
step() {  # step NAME FUNCTION: runs it with its output in NAME.log, records its status and time
  local name=$1 fn=$2 t0 rc status detail
  t0=$(date +%s.%N)
  echo
  echo "== $name"
  set +e
  ( set -e; ((dry)) && echo "[dry run: fake driver, not a GPU]"; "$fn" ) 2>&1 | tee "$out/$name.log"
  rc=${PIPESTATUS[0]}
  set -e
  detail=$(tail -1 "$out/$name.log" | tr -d '"\\' | cut -c1-300)
  case $rc in 0) status=pass ;; 77) status=not_run ;; *) status=fail ;; esac
  steps+=("$name|$status|$(echo "$(date +%s.%N) - $t0" | awk '{printf "%.1f", $1 - $3}')|$detail")
  echo "-- $name: $status"
}

run_doctor() {
  "$kiln" doctor
  "$kiln" doctor | grep -q "compute capability" || { echo "doctor: no usable GPU"; return 1; }
}

run_gpu_tests() {
  if ((dry)); then
    echo "not run: tests/runtime/gpu_test.sh compares kernel results, which the fake driver does not compute"
    return 77
  fi
  [ -n "$py" ] || { echo "gpu_test.sh needs python3"; return 1; }
  local data
  data=$(testdata)
  KILN_ONNX_TESTDATA=$data "$gpu_test" "$kiln"
}

testdata() {  # the conformance suites' folder, unpacked from the bundle if need be
  if [ -n "$bundle" ] && [ -f "$bundle/data/onnx-testdata.tar.gz" ]; then
    [ -d "$work/testdata/data" ] || { mkdir -p "$work/testdata" && tar -C "$work/testdata" -xzf "$bundle/data/onnx-testdata.tar.gz"; }
    echo "$work/testdata/data"
  else
    echo /usr/share/libonnx-testdata/data
  fi
}

# One plan: compile for $arch, run on the reference backend and on the GPU
# with the same seeded inputs, compare. Prints one line: STATUS<TAB>NAME<TAB>DETAIL.
#   not_compiled: kiln rejects the model for the CPU target too (unsupported,
#   invalid, or shapes only known at run time), as the reference conformance
#   run does; ref_error: the CPU reference cannot run it; failures:
#   gpu_refused: the CPU target takes it but GPU targets refuse it with the
#   one documented refusal of a known gap (sizes decided at run time: GPU
#   plans do not hold them yet, docs/dynamic_shapes.md); counted apart, not
#   hidden. Failures: compile_error (the GPU compile fails where the CPU one
#   succeeds in any other way, or an internal error), gpu_error (load,
#   launch or run on the GPU), mismatch.
check_plan() {
  local name=$1 model=$2 tol=$3 flags=$4 d rc msg
  d=$work/p/${name//\//_}
  mkdir -p "$d"
  # shellcheck disable=SC2086
  "$kiln" compile "$model" --target "$arch" $flags -o "$d/plan" >"$d/compile.txt" 2>&1 && rc=0 || rc=$?
  if ((rc)); then
    # A model kiln rejects for any target (its frontend or passes) is not the
    # GPU's business; one that compiles for the CPU but not for the GPU is.
    msg=$(grep -v '^\s*$' "$d/compile.txt" | tail -1 | tr '\t' ' ' | cut -c1-240)
    local status=compile_error
    # shellcheck disable=SC2086
    if ((rc == 1)) && ! "$kiln" compile "$model" --target cpu $flags -o "$d/cpu.plan" >/dev/null 2>&1; then
      status=not_compiled
    elif ((rc == 1)) && grep -q 'the graph has result sizes decided at run time' "$d/compile.txt"; then
      status=gpu_refused
    fi
    printf '%s\t%s\t%s\n' "$status" "$name" "$msg"
    rm -rf "$d"; return 0
  fi
  if ! "$kiln" run "$d/plan" --backend ref --outputs "$d/ref" >"$d/ref.txt" 2>&1; then
    printf 'ref_error\t%s\t%s\n' "$name" "$(tail -1 "$d/ref.txt" | cut -c1-240)"
    rm -rf "$d"; return 0
  fi
  if ! "$kiln" run "$d/plan" --backend gpu --iterations 2 --outputs "$d/gpu" >"$d/gpu.txt" 2>&1; then
    printf 'gpu_error\t%s\t%s\n' "$name" "$(tail -1 "$d/gpu.txt" | cut -c1-240)"
    rm -rf "$d"; return 0
  fi
  if ! grep -q "^backend: gpu" "$d/gpu.txt"; then
    printf 'gpu_error\t%s\t%s\n' "$name" "did not run on the GPU: $(grep '^backend' "$d/gpu.txt" | cut -c1-200)"
  elif ((dry)); then
    printf 'launched\t%s\t%s\n' "$name" "loaded, launched and replayed on the fake driver (values not compared)"
  else
    msg=$("$py" "$bench_compare" "$d/gpu" "$d/ref" "$tol" 2>&1) && rc=0 || rc=$?
    printf '%s\t%s\t%s %s\n' "$( ((rc)) && echo mismatch || echo pass)" "$name" "$msg" \
      "$(grep -o 'compute [0-9.]* ms' "$d/gpu.txt" | head -1)"
  fi
  rm -rf "$d"
}
export -f check_plan
bench_compare=$here/gpu_run_all_compare.py
export kiln arch dry py work bench_compare

tally() {  # tally FILE: counts per status; fails on any failure status
  local f=$1
  echo "counts: $(cut -f1 "$f" | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}' | sed 's/, $//')"
  if grep -Eq '^(gpu_error|mismatch|compile_error)' "$f"; then
    echo "failures:"; grep -E '^(gpu_error|mismatch|compile_error)' "$f" | head -40
    local n; n=$(grep -Ec '^(gpu_error|mismatch|compile_error)' "$f")
    echo "$n failures of $(wc -l < "$f") plans ($(grep -Ec '^(pass|launched)' "$f") $( ((dry)) && echo launched || echo passed))"
    return 1
  fi
  echo "0 failures of $(wc -l < "$f") plans ($(grep -Ec '^(pass|launched)' "$f") $( ((dry)) && echo launched on the fake driver || echo equal the reference))"
}

run_conformance() {
  local data s
  data=$(testdata)
  : > "$out/conformance.tsv"
  for s in $suites; do
    [ -d "$data/$s" ] || { echo "no suite $data/$s"; return 1; }
    find "$data/$s" -mindepth 1 -maxdepth 1 -type d | sort | while read -r t; do
      echo "$s/$(basename "$t")"$'\t'"$t/model.onnx"
    done
  done > "$work/conformance.list"
  echo "$(wc -l < "$work/conformance.list") tests, $jobs at a time"
  tr '\n' '\0' < "$work/conformance.list" |
    xargs -0 -P "$jobs" -I{} bash -c 'IFS=$'"'\t'"' read -r n m <<< "$1"; check_plan "$n" "$m" default ""' _ {} \
    >> "$out/conformance.tsv"
  sort -o "$out/conformance.tsv" -k2 "$out/conformance.tsv"
  tally "$out/conformance.tsv"
}

# Per-model bounds: fp32 at the whole-model bound of docs/testing.md, fp16 at
# those of docs/precision.md (the fp16 reference runs the same fp16 graph).
model_tol() {
  case $1:$2 in
    *:fp32) echo 1e-4,1e-3 ;;
    resnet50:fp16) echo 0.1,0.04 ;;
    mobilenet_v2:fp16) echo 2e-2,8e-3 ;;
    *:fp16) echo 7.5e-3,3e-3 ;;
  esac
}

run_models() {  # run_models [TSV PRECISIONS]: models.tsv, fp32 and fp16 by default
  local tsv=${1:-models} precisions=${2:-fp32 fp16}
  local dir=$work/models m p
  if [ -n "$bundle" ] && [ -d "$bundle/models/prepared" ] && { [ -z "$py" ] || ((dry)); }; then
    dir=$bundle/models/prepared   # prepared here: the dry run's machine has no Python
  elif [ -n "$repo" ] && [ -f "$repo/build/models/resnet50/model.onnx" ]; then
    dir=$repo/build/models
  else
    [ -n "$py" ] || { echo "no python3 with numpy to rebuild the models (tests/models/prepare_models.py)"; return 1; }
    "$py" "$skeletons/prepare_models.py" "$dir" $model_names
  fi
  : > "$out/$tsv.tsv"
  for m in ${model_names:-$(ls "$dir")}; do
    [ -f "$dir/$m/model.onnx" ] || { echo "no model $dir/$m" >&2; return 1; }
    for p in $precisions; do echo "$m:$p"; done
  done > "$work/models.list"
  echo "$(wc -l < "$work/models.list") plans from $dir"
  local mj=$(( jobs < 4 ? jobs : 4 ))
  while IFS=: read -r m p; do
    printf '%s\t%s\t%s\t%s\n' "$m/$p" "$dir/$m/model.onnx" "$(model_tol "$m" "$p")" "--precision $p"
  done < "$work/models.list" | tr '\n' '\0' |
    xargs -0 -P "$mj" -I{} bash -c 'IFS=$'"'\t'"' read -r n m t f <<< "$1"; check_plan "$n" "$m" "$t" "$f"' _ {} \
    >> "$out/$tsv.tsv"
  sort -o "$out/$tsv.tsv" -k2 "$out/$tsv.tsv"
  tally "$out/$tsv.tsv"
}

# The wgmma kernels are opt-in (--target sm_90a) until this step passes on an
# H100: the same fp16 model plans for sm_90a, against the reference.
run_wgmma() {
  if [ "$arch" != sm_90 ]; then
    echo "not run: --target sm_90a (wgmma) runs on Hopper (sm_90) only; this GPU is $arch"
    return 77
  fi
  arch=sm_90a
  export arch
  run_models models_sm90a fp16
}

run_bench() {
  if ((skip_bench)); then echo "not run (--skip-bench)"; return 77; fi
  if ((dry)); then
    if [ -n "$py" ] && "$py" -c "import onnx" 2>/dev/null; then
      (cd "$bench_root" && KILN=$kiln PYTHONPATH=$bench_root "$py" -m bench.gpubench --dry-run --out "$out/bench-dry-run.json")
      return
    fi
    echo "not run: bench/gpu.sh --dry-run needs python3 with numpy and onnx (the GPU machine has them)"
    return 77
  fi
  (cd "$bench_root" && KILN=$kiln PYTHONPATH=$bench_root PYTHONUNBUFFERED=1 "$py" -m bench.gpubench --out "$out/bench.json")
}

t_start=$(date +%s)
step doctor run_doctor
step gpu_tests run_gpu_tests
step conformance run_conformance
step models run_models
step wgmma run_wgmma
step bench run_bench

fail=0
for s in "${steps[@]}"; do
  [[ $s == *"|fail|"* ]] && fail=1
done
{
  echo "$banner"
  for s in "${steps[@]}"; do
    IFS='|' read -r n st sec det <<< "$s"
    printf '%-12s %-8s %7ss  %s\n' "$n" "$st" "$sec" "$det"
  done
  echo "total: $(( $(date +%s) - t_start )) s; $( ((fail)) && echo FAILED || echo passed)"
} | tee "$out/summary.txt" > "$work/summary"
{
  printf '{\n  "dry_run": %s,\n  "note": "%s",\n  "arch": "%s",\n  "gpu": "%s",\n  "date": "%s",\n  "steps": [\n' \
    "$( ((dry)) && echo true || echo false)" "$mode" "$arch" "$gpu_slug" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  i=0
  for s in "${steps[@]}"; do
    IFS='|' read -r n st sec det <<< "$s"
    ((i++)) && printf ',\n'
    printf '    {"name": "%s", "status": "%s", "seconds": %s, "detail": "%s"}' "$n" "$st" "$sec" "$det"
  done
  printf '\n  ],\n  "total_seconds": %s,\n  "passed": %s\n}\n' "$(( $(date +%s) - t_start ))" "$( ((fail)) && echo false || echo true)"
} > "$out/summary.json"
echo
cat "$out/summary.txt"
exit "$fail"
