#!/bin/sh
# Issue 16 item 3: `kiln run|bench MODEL.onnx` with a GPU --target builds a
# plan in memory and runs it through the runtime, as trtexec --onnx does;
# --save-engine (-o, --saveEngine) writes that plan, and `kiln run` of the
# saved plan gives the same checksums. On the simulator (--backend sim) the
# plan's own kernels run; --backend auto on a machine without a GPU runs it on
# the runtime's CPU path and says why.
# Usage: save_engine_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
model=$2/small.onnx
. "$(dirname "$0")/lib.sh"
checksums() { grep '^output [0-9]* ".*": .* checksum ' "$1"; }

# Compile, run on the simulator and save, in one command.
"$kiln" run "$model" --target sm_90 --backend sim --save-engine "$dir/m.plan" >"$out" 2>&1 || fail "run --save-engine exit $?"
cp "$out" "$dir/onnx.txt"
grep -q "^$dir/m.plan: plan written; GPU kernels: 3 for sm_90" "$out" || fail "no 'plan written' line"
grep -q '^backend: sim (the plan'"'"'s kernels and launch list on the CPU simulator)' "$out" || fail "not run on sim"
grep -Eq '^compile: [0-9.]+ ms: import [0-9.]+ ms, passes [0-9.]+ ms, kernels [0-9.]+ ms \(emitted and NVRTC-compiled\), plan [0-9.]+ ms; 5 nodes -> 3 nodes, GPU kernels: 3 for sm_90' "$out" \
  || fail "compile line"
[ "$(checksums "$dir/onnx.txt" | wc -l)" -eq 3 ] || fail "expected 3 output checksums"
"$kiln" run "$dir/m.plan" --backend sim >"$out" 2>&1 || fail "run saved plan exit $?"
[ "$(checksums "$dir/onnx.txt")" = "$(checksums "$out")" ] || fail "the saved plan's checksums differ from the run that saved it"

# -o and trtexec's --saveEngine=FILE write the same plan.
"$kiln" run "$model" --target sm_90 --backend sim -o "$dir/o.plan" >"$out" 2>&1 || fail "run -o exit $?"
cmp -s "$dir/m.plan" "$dir/o.plan" || fail "-o wrote another plan than --save-engine"
"$kiln" bench "$model" --target sm_90 --backend sim --iterations 2 --warmup-ms 0 --saveEngine="$dir/b.plan" \
  --export-json "$dir/b.json" >"$out" 2>&1 || fail "bench --saveEngine exit $?"
cmp -s "$dir/m.plan" "$dir/b.plan" || fail "bench saved another plan than run"
grep -q "^Plan: built in memory from $model (kiln .*, target sm_90, precision fp32, 3 GPU kernels)" "$out" || fail "bench Plan line"
grep -Eq '^Build: [0-9.]+ ms: import [0-9.]+ ms, passes [0-9.]+ ms, kernels [0-9.]+ ms \(emitted and NVRTC-compiled\)' "$out" \
  || fail "bench Build line"
grep -q '^Backend: sim ' "$out" || fail "bench backend"
python3 - "$dir/b.json" <<'PY' || fail "bench --export-json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["compiled_in_memory"] is True and d["backend"] == "sim" and d["target"] == "sm_90", d
assert set(d["build_ms"]) == {"import", "passes", "kernels", "plan"}, d["build_ms"]
PY

# The default backend is auto: the GPU when usable, else the runtime's CPU
# path; the saved plan, run the same way, gives the same checksums.
"$kiln" run "$model" --target sm_90 -o "$dir/a.plan" >"$out" 2>&1 || fail "run --target sm_90 exit $?"
cp "$out" "$dir/auto.txt"
grep -Eq '^backend: (gpu|ref) ' "$out" || fail "auto backend line"
if grep -q '^backend: ref' "$out"; then
  grep -Eq '^backend: ref .*(no CUDA driver|no CUDA device|CPU)' "$out" || fail "the CPU fallback does not say why"
fi
"$kiln" run "$dir/a.plan" >"$out" 2>&1 || fail "run saved plan (auto) exit $?"
[ "$(checksums "$dir/auto.txt")" = "$(checksums "$out")" ] || fail "auto: the saved plan's checksums differ"

# A CPU target with --save-engine: a CPU plan, run through the runtime too.
"$kiln" run "$model" --save-engine "$dir/c.plan" >"$out" 2>&1 || fail "run cpu --save-engine exit $?"
cp "$out" "$dir/cpu.txt"
grep -q "^$dir/c.plan: plan written; GPU kernels: none" "$out" || fail "cpu plan line"
"$kiln" run "$dir/c.plan" >"$out" 2>&1 || fail "run cpu plan exit $?"
[ "$(checksums "$dir/cpu.txt")" = "$(checksums "$out")" ] || fail "cpu: the saved plan's checksums differ"

expect_error "'0' is not a plan file name: -o writes the plan" bench "$model" -o 0
expect_error "'99' is not a plan file name: -o writes the plan" compile "$model" -o 99
# (Without --target, the messages say none was given: cli_backend_flag.)
expect_error "--backend gpu runs GPU kernels and --target cpu builds none: add --target auto, portable or sm_XX" \
  run "$model" --backend gpu --target cpu
expect_error "--backend sim runs GPU kernels and --target cpu builds none" \
  run "$model" --backend sim --target cpu -o "$dir/x.plan"
expect_error "$dir/no/such/m.plan: cannot write (--save-engine)" run "$model" --target sm_90 --save-engine "$dir/no/such/m.plan"
expect_error "a plan is already compiled; --save-engine (-o) only applies when compiling an .onnx model (to keep" \
  run "$dir/m.plan" --save-engine "$dir/y.plan"
echo PASS
