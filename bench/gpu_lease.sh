#!/usr/bin/env bash
# Every GPU check and figure kiln wants from a device lease, in ONE command of
# at most 10 minutes (15 minutes of device time a lease, a machine start of 1
# to 2 of them; /work/.library/device/README.md; docs/benchmarks.md, "A GPU
# lease"). Each lane stops at its deadline so that what finished comes back:
#
#   bench/gpu_lease.sh OUT_DIR [--budget SECONDS] [--archive FILE] [--quick] [--dry-run]
#
# It runs from the tree with kiln from .devbundle/ (bench/device_bundle.sh
# --lease: no BLAS, so nothing here runs the reference backend; every value
# is held to a suite's expected outputs or to ONNX Runtime) or build/bin/kiln.
#
# Phase A, correctness, lanes side by side (GPU shared, 16 CPU cores), until
# 60% of the budget:
#   first     kiln doctor; tests/runtime/gpu_test.sh --expected (15 node
#             plans, sm_90 CUBIN and sm_80 PTX JIT, and --tune)
#   suites    `kiln conformance --backend gpu --target sm_90`: Debian's 1.12
#             suites (the bundle's tar; less the tests byte for byte the
#             same as 1.23's) then the onnx 1.23 suites (written here by
#             tools/onnx_suite.py from the machine's onnx), in chunks of 200
#             tests with a JSON each, so a deadline loses one chunk
#   models    the five real models (prepare_models.py: ONNX Runtime's
#             outputs) fp32 and fp16 for sm_90, fp16 for sm_90a (wgmma)
#   zoo       run_zoo.py gpu-fp32, gpu-fp16, gpu-bf16
#   zoo_dyn   the dynamic zoo tier's profile plans, run_zoo_dynamic.py
#             --backends gpu, fp32 then fp16
#   profiles  the profile-plan CLI tests in their gpu mode (gpu_profiles,
#             gpu_spatial_profiles, zoo_spatial_profiles, decoder_gpu_plan)
# Phase B, timing, one lane at a time on an otherwise idle GPU:
#   perf      bench/perf_vs_model.py, the five models (fp16, sm_90), to 78%
#   wgmma     kiln bench (CUDA Graph replay) of the fp16 plans of ResNet-50
#             and BERT-base for sm_90 and sm_90a, alternated twice, to 88%
#   autotune  bench/gpu.sh ResNet-50 batch 1 with torch.compile max-autotune
#             (it compiles for minutes: last, with what the budget leaves)
# Everything lands in OUT_DIR: a log per lane, JSON per step, lanes.txt (each
# lane's start, end and status), summary.txt; --archive FILE packs OUT_DIR
# into one .tar.gz (what a lease brings back from $OUT).
#
# --quick: a few tests, models and zoo models per lane (the rehearsal).
# --dry-run: no GPU; the strict fake driver (build/lib/fake_cuda), which runs
# no arithmetic: every value check fails by design and no figure is a GPU
# figure. It checks the script; a library named like the build's BLAS that
# is not one is put first on the library path, so that any reference GEMM on
# the lease path fails naming the BLAS (ctest bench_gpu_lease_dry_run).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

if [ "${1:-}" = --lane ]; then
  lane=$2 out=$3
else
  lane=""
  out=${1:?usage: gpu_lease.sh OUT_DIR [--budget SECONDS] [--archive FILE] [--quick] [--dry-run]}
  shift
  budget=540 dry=0 quick=0 archive=""
  while (($#)); do
    case $1 in
      --budget) budget=$2; shift 2 ;;
      --archive) archive=$2; shift 2 ;;
      --quick) quick=1; shift ;;
      --dry-run) dry=1; shift ;;
      *) echo "gpu_lease.sh: unknown argument '$1'" >&2; exit 1 ;;
    esac
  done
  [[ $budget =~ ^[0-9]+$ ]] && ((budget >= 30)) || { echo "gpu_lease.sh: --budget is whole seconds, at least 30" >&2; exit 1; }
  mkdir -p "$out" || exit 1
  out=$(cd "$out" && pwd)
  export KILN_LEASE_DRY=$dry KILN_LEASE_QUICK=$quick
  export KILN_LEASE_DATA=${KILN_LEASE_DATA:-$(mktemp -d "${TMPDIR:-/tmp}/kiln-lease-data.XXXXXX")}
fi
dry=$KILN_LEASE_DRY quick=$KILN_LEASE_QUICK data=$KILN_LEASE_DATA

# kiln: $KILN, else the bundle's (carried as .devbundle), else the build's.
if [ -n "${KILN:-}" ]; then kiln=$KILN
elif [ -x "$repo/.devbundle/bin/kiln" ]; then kiln=$repo/.devbundle/bin/kiln
else kiln=$repo/build/bin/kiln; fi
export KILN=$kiln
py=python3
[ -x "$repo/.venv/bin/python" ] && py=$repo/.venv/bin/python  # this machine; the device has no .venv
export PYTHON=$py KILN_PYTHON=$py PYTHONUNBUFFERED=1 KILN_CACHE_DIR=${KILN_CACHE_DIR:-$data/kernel-cache}
# NVRTC and the CUDA headers of the machine's toolkit when it has one.
if [ -z "${KILN_NVRTC_LIBRARY:-}" ] && [ -f /usr/local/cuda/lib64/libnvrtc.so.13 ]; then
  export KILN_NVRTC_LIBRARY=/usr/local/cuda/lib64/libnvrtc.so.13
fi
if [ -z "${KILN_CUDA_INCLUDE_DIR:-}" ] && [ -f /usr/local/cuda/include/cuda_fp16.h ]; then
  export KILN_CUDA_INCLUDE_DIR=/usr/local/cuda/include
fi

# What each lane covers; --quick takes a sample of each.
real_models="resnet50 mobilenet_v2 bert_base vit_b_16 gpt2"
timed_models="resnet50 bert_base"
suite_limit=0 suite_jobs=10 zoo_models="" dyn_models="" profile_tests="gpu_profiles gpu_spatial_profiles zoo_spatial_profiles decoder_gpu_plan"
if ((quick)); then
  real_models="mobilenet_v2" timed_models="mobilenet_v2" suite_limit=6 suite_jobs=2
  zoo_models="bert_tiny" dyn_models="bert_tiny" profile_tests="decoder_gpu_plan gpu_profiles"
fi

lane_first() {
  "$kiln" doctor
  KILN_ONNX_TESTDATA=$data/onnx-1.12 "$repo/tests/runtime/gpu_test.sh" "$kiln" --expected
}

lane_suites() {
  local chunk=0 c tag lists=()
  local o123=${KILN_LEASE_ONNX123:-$data/onnx-1.23}
  if [ -z "${KILN_LEASE_ONNX123:-}" ]; then
    echo "writing the onnx 1.23 suites (tools/onnx_suite.py, the machine's onnx)"
    "$py" -W ignore "$repo/tools/onnx_suite.py" "$o123" > "$data/suite_generate.log" 2>&1 ||
      { echo "suite generation failed:"; tail -5 "$data/suite_generate.log"; }
  fi
  # Debian's 1.12 tests first (never run on a GPU before), less those whose
  # folder is byte for byte the 1.23 suite's of the same name (460 of the 932
  # node tests: the same test, run once); then the 1.23 suites. Chunks of 200
  # tests, each with its own JSON: a deadline loses one chunk.
  local sub t
  for sub in node pytorch-converted pytorch-operator simple; do
    [ -d "$data/onnx-1.12/$sub" ] || continue
    for t in "$data/onnx-1.12/$sub"/*/; do
      t=${t%/}
      if [ -d "$o123/$sub/${t##*/}" ] && diff -rq "$t" "$o123/$sub/${t##*/}" > /dev/null 2>&1; then
        echo "$t" >> "$data/onnx-1.12.same"
      else
        echo "$t"
      fi
    done > "$data/onnx-1.12.$sub"
    if ((suite_limit)); then head -n "$suite_limit" "$data/onnx-1.12.$sub"; else cat "$data/onnx-1.12.$sub"; fi
  done > "$data/onnx-1.12.list"
  echo "onnx 1.12: $(wc -l < "$data/onnx-1.12.list") tests to run, $(cat "$data/onnx-1.12.same" 2>/dev/null | wc -l) the same as 1.23's"
  for sub in node pytorch-converted pytorch-operator simple; do
    [ -d "$o123/$sub" ] || continue
    find "$o123/$sub" -mindepth 1 -maxdepth 1 -type d | sort | { if ((suite_limit)); then head -n "$suite_limit"; else cat; fi; }
  done > "$data/onnx-1.23.list"
  echo "onnx 1.23: $(wc -l < "$data/onnx-1.23.list") tests"
  split -l 200 -d -a 2 "$data/onnx-1.12.list" "$data/chunk.onnx-1.12."
  split -l 200 -d -a 2 "$data/onnx-1.23.list" "$data/chunk.onnx-1.23."
  shopt -s nullglob
  lists=("$data"/chunk.onnx-1.12.* "$data"/chunk.onnx-1.23.*)
  for c in "${lists[@]}"; do
    chunk=$((chunk + 1))
    tag=$(basename "$c" | sed 's/^chunk\.//; s/\.\([0-9]*\)$/_\1/')
    echo "== chunk $chunk of ${#lists[@]}: $tag, $(wc -l < "$c") tests"
    # shellcheck disable=SC2046
    "$kiln" conformance $(cat "$c") --backend gpu --target sm_90 -j "$suite_jobs" --timeout 120 -v \
      --json "$out/conformance_${tag}.json" || true
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

prepare_real_models() {  # once for the lanes that need them (models, perf, wgmma)
  if [ ! -f "$data/models/.done" ]; then
    # shellcheck disable=SC2086
    "$py" "$repo/tests/models/prepare_models.py" "$data/models" $real_models && touch "$data/models/.done"
  fi
}

lane_models() {
  prepare_real_models || return 1
  local m p t
  for t in "sm_90 fp32" "sm_90 fp16" "sm_90a fp16"; do
    set -- $t
    for m in $real_models; do
      [ "$1" = sm_90a ] && [ "$m" = gpt2 ] && continue
      echo "== $m $2 $1$([ "$1" = sm_90a ] && echo ' (wgmma)')"
      "$kiln" conformance "$data/models/$m" --backend gpu --target "$1" --precision "$2" -j 1 --timeout 300 -v \
        --show-errors --tolerance "$(model_tol "$m" "$2")" || true
    done
  done
}

lane_zoo() {
  # shellcheck disable=SC2086
  "$py" "$repo/tests/models/prepare_models.py" --zoo "$data/zoo" $zoo_models > "$out/zoo_prepare.log" 2>&1 ||
    echo "zoo prepare failed (see zoo_prepare.log)"
  local c
  for c in gpu-fp32 gpu-fp16 gpu-bf16; do
    # shellcheck disable=SC2086
    "$py" "$repo/tests/models/zoo/run_zoo.py" --kiln "$kiln" --zoo "$data/zoo" --config "$c" --jobs 4 \
      --json "$out/zoo_$c.json" $zoo_models || true
  done
}

lane_zoo_dyn() {
  # shellcheck disable=SC2086
  "$py" "$repo/tests/models/prepare_models.py" --zoo-dynamic "$data/zoo_dynamic" $dyn_models \
    > "$out/zoo_dyn_prepare.log" 2>&1 || echo "dynamic zoo prepare failed (see zoo_dyn_prepare.log)"
  local p
  for p in fp32 fp16; do
    # shellcheck disable=SC2086
    "$py" "$repo/tests/models/zoo/run_zoo_dynamic.py" --kiln "$kiln" --zoo "$data/zoo_dynamic" --precision "$p" \
      --backends gpu --json "$out/zoo_dynamic_gpu-$p.json" $dyn_models || true
  done
}

lane_profiles() {
  local t=$repo/tests/cli name rc
  # The zoo models two of the tests read (fcn_tiny_dynamic, llama_kv_prefill), prepared apart from the zoo lane.
  "$py" "$repo/tests/models/prepare_models.py" --zoo "$data/zoo_profiles" fcn_tiny_dynamic llama_kv_prefill \
    > "$out/profiles_prepare.log" 2>&1 || echo "prepare failed (see profiles_prepare.log)"
  for name in $profile_tests; do
    echo "== $name (gpu)"
    case $name in
      gpu_profiles|gpu_spatial_profiles) sh "$t/${name}_test.sh" "$kiln" "$t" "$py" gpu ;;
      zoo_spatial_profiles) sh "$t/${name}_test.sh" "$kiln" "$data/zoo_profiles" "$t" "$py" gpu ;;
      decoder_gpu_plan) "$t/${name}_test.sh" "$kiln" "$data/zoo_profiles" gpu ;;
    esac
    rc=$?
    echo "-- $name (gpu): $( ((rc)) && echo "FAIL (exit $rc)" || echo pass)"
  done
}

lane_perf() {
  prepare_real_models || return 1
  # shellcheck disable=SC2086
  "$py" "$here/perf_vs_model.py" --kiln "$kiln" --models "$data/models" --out "$out/perf_vs_model.json" \
    --gpu h100 --target sm_90 --precision fp16 --iterations "$((quick ? 5 : 200))" $real_models
}

# sm_90a (the wgmma GEMM kernels, opt-in) against sm_90 (mma.sync), the same
# fp16 model, whole-plan CUDA Graph replay; alternated so drift shows.
lane_wgmma() {
  prepare_real_models || return 1
  local m t r its=$((quick ? 5 : 300))
  for m in $timed_models; do
    for t in sm_90 sm_90a; do
      "$kiln" compile "$data/models/$m/model.onnx" --target $t --precision fp16 -o "$data/$m.$t.plan" > /dev/null ||
        { echo "$m: compile for $t failed"; continue 2; }
    done
    for r in 1 2; do
      for t in sm_90 sm_90a; do
        "$kiln" bench "$data/$m.$t.plan" --backend gpu --iterations "$its" --warmup-ms 300 \
          --export-json "$out/wgmma_${m}_${t}_$r.json" > /dev/null || echo "$m $t round $r: kiln bench failed"
      done
    done
    "$py" - "$out" "$m" <<'PY'
import json, os, sys
out, m = sys.argv[1:3]
def med(t, r):
    p = os.path.join(out, f"wgmma_{m}_{t}_{r}.json")
    if not os.path.exists(p):
        return None
    s = json.load(open(p))
    g = s.get("gpu_compute_ms")
    return (g.get("median") if isinstance(g, dict) else None) or s["latency_ms"]["median"]
a, b = [med("sm_90", r) for r in (1, 2)], [med("sm_90a", r) for r in (1, 2)]
if None in a + b:
    print(f"{m} fp16: sm_90 {a} ms, sm_90a {b} ms (a run is missing)")
else:
    print(f"{m} fp16 (median ms, two rounds): sm_90 {a[0]:.4f} {a[1]:.4f}, sm_90a (wgmma) {b[0]:.4f} {b[1]:.4f}; "
          f"sm_90a / sm_90 = {min(b) / min(a):.3f}")
PY
  done
}

lane_autotune() {
  (cd "$repo" && KILN=$kiln "$py" -m bench.gpubench --models resnet50 --batch1-only --no-micro \
    --compile-mode max-autotune --out "$out/bench_resnet50_max_autotune.json")
}

if [ -n "$lane" ]; then
  "lane_$lane"
  exit
fi

# ---- the driver
t0=$(date +%s)
now() { echo $(($(date +%s) - t0)); }
if ((dry)); then
  fake=$repo/build/lib/fake_cuda
  [ -f "$fake/libcuda.so.1" ] || { echo "gpu_lease.sh: --dry-run needs the fake driver ($fake/libcuda.so.1)" >&2; exit 1; }
  # Not a BLAS, under the BLAS's name: a reference GEMM anywhere fails, naming it.
  soname=$(sed -n 's/^KILN_BLAS_SONAME:INTERNAL=//p' "$repo/build/CMakeCache.txt" 2>/dev/null)
  mkdir -p "$data/no-blas"
  [ -n "$soname" ] && cp "$fake/libcuda.so.1" "$data/no-blas/$soname"
  export LD_LIBRARY_PATH=$data/no-blas:$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_CUDA_DEVICE=h100
  gemm=$repo/tests/runtime/tuning_matmul.onnx
  if [ -n "$soname" ] && ! "$kiln" run "$gemm" --backend ref > "$data/no-blas.txt" 2>&1 &&
     grep -q "BLAS library $soname" "$data/no-blas.txt"; then
    blas_note="no BLAS: a reference GEMM fails here, as on the device ($(grep -o 'the BLAS library.*' "$data/no-blas.txt" | head -1))"
  else
    echo "gpu_lease.sh: --dry-run could not hide the BLAS ($soname) from kiln: $(tail -1 "$data/no-blas.txt")" >&2
    exit 1
  fi
fi
{
  echo "kiln gpu_lease $(date -u +%Y-%m-%dT%H:%M:%SZ), budget $budget s$( ((quick)) && echo ', --quick')$( ((dry)) && echo ', DRY RUN on the fake driver: no figure is a GPU figure')"
  echo "commit: $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null) kiln: $kiln"
  [ -z "${blas_note:-}" ] || echo "$blas_note"
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm,power.draw \
    --format=csv 2>&1 | head -3
  echo "nvrtc: ${KILN_NVRTC_LIBRARY:-found by kiln}; headers: ${KILN_CUDA_INCLUDE_DIR:-as built}; $(nproc) CPUs"
  "$py" -c "import torch, onnx, onnxruntime; print('torch', torch.__version__, 'onnx', onnx.__version__, 'ort', onnxruntime.__version__)" 2>&1 | tail -1
} > "$out/summary.txt"
cat "$out/summary.txt"

# Debian's 1.12 suites: the bundle's tar with the bundle's kiln (Python
# unpacks it: the device may have no xz), else this machine's package.
tarball=$(dirname "$(dirname "$kiln")")/data/onnx-testdata-1.12.tar.xz
if [ -f "$tarball" ]; then
  "$py" -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$tarball" "$data/unpacked" &&
    ln -sfn "$data/unpacked/data" "$data/onnx-1.12"
elif [ -d /usr/share/libonnx-testdata/data/node ]; then
  ln -sfn /usr/share/libonnx-testdata/data "$data/onnx-1.12"
fi
[ -d "$data/onnx-1.12/node" ] || echo "no Debian 1.12 suites (bench/device_bundle.sh --lease packs them)" | tee -a "$out/summary.txt"

declare -A pid started
start_lane() {  # start_lane NAME: in the background, its own session (a deadline kills its process group)
  started[$1]=$(now)
  setsid "$0" --lane "$1" "$out" > "$out/$1.log" 2>&1 &
  pid[$1]=$!
}
# run_until DEADLINE NAME...: waits for the lanes, each line of lanes.txt
# written as its lane ends; what still runs at DEADLINE is killed.
run_until() {
  local deadline=$1 n rc left
  shift
  left=("$@")
  while ((${#left[@]})); do
    local still=()
    for n in "${left[@]}"; do
      if kill -0 "${pid[$n]}" 2>/dev/null; then
        still+=("$n")
      else
        wait "${pid[$n]}"
        rc=$?
        printf '%-9s %4s s to %4s s  exit %s\n' "$n" "${started[$n]}" "$(now)" "$rc" >> "$out/lanes.txt"
      fi
    done
    left=("${still[@]}")
    ((${#left[@]})) || break
    if (($(now) >= deadline)); then
      for n in "${left[@]}"; do kill -TERM -- "-${pid[$n]}" 2>/dev/null; done
      sleep 2
      for n in "${left[@]}"; do
        kill -KILL -- "-${pid[$n]}" 2>/dev/null
        wait "${pid[$n]}" 2>/dev/null
        printf '%-9s %4s s to %4s s  stopped at the deadline\n' "$n" "${started[$n]}" "$(now)" >> "$out/lanes.txt"
      done
      break
    fi
    sleep 1
  done
}

phase_a=$((budget * 60 / 100))
: > "$out/lanes.txt"
for n in first suites models zoo zoo_dyn profiles; do start_lane $n; done
run_until "$phase_a" first suites models zoo zoo_dyn profiles
# Timing alone on the GPU: perf to 78% of the budget, wgmma to 88%, autotune the rest.
start_lane perf
run_until $((budget * 78 / 100)) perf
start_lane wgmma
run_until $((budget * 88 / 100)) wgmma
if ((dry)); then
  echo "autotune  not run: a dry run (it times PyTorch on a GPU)" >> "$out/lanes.txt"
else
  start_lane autotune
  run_until "$budget" autotune
fi
echo "lanes ended at $(now) s" >> "$out/lanes.txt"

# The short table the command's output tail carries.
{
  echo "== lanes (start, end, status)"; cat "$out/lanes.txt"
  echo "== first"; grep -E "^(FAIL|skipped|ok)|compute capability" "$out/first.log" | tail -4
  echo "== suites"; grep -E "^\S+ \[gpu\]:" "$out/suites.log"
  echo "== models"; grep -E "^== |\[gpu\]:" "$out/models.log" | paste - - | sed 's/\t/ /' | sed 's/ models \[gpu\]//'
  echo "== zoo"; grep -E "^zoo \[" "$out/zoo.log" "$out/zoo_dyn.log" | sed 's/^[^:]*://'
  echo "== profiles"; grep -E "^-- " "$out/profiles.log"
  echo "== perf"; grep -E "modelled .* measured" "$out/perf.log"
  echo "== wgmma"; grep -E "fp16" "$out/wgmma.log"
  echo "== autotune"; grep -E "batch 1: kiln|^failed" "$out/autotune.log" 2>/dev/null
} > "$out/table.txt" 2>&1
cat "$out/table.txt" >> "$out/summary.txt"
echo
cat "$out/table.txt"
[ -n "$archive" ] && tar -C "$(dirname "$out")" -czf "$archive" "$(basename "$out")" && echo "archive: $archive ($(du -h "$archive" | cut -f1))"
echo "done at $(now) s"
# The scratch data (suites, models, kernel cache: tens of thousands of files)
# goes in the background: the command's time is the lease's.
(rm -rf "$data" &)
exit 0
