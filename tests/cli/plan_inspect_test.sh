#!/bin/sh
# kiln inspect MODEL.plan on a plan compiled for sm_90 and one for the CPU:
# - sm_90: every kernel listed with registers > 0, equal to what ptxas
#   reported to `kiln compile --json` and to the CUBIN's .nv.info; every
#   launch's kernel, grid and block equal to the launches section as read by an
#   independent Python reader of the file (docs/plan_format.md);
# - cpu: no kernels, and why; I/O and the memory plan;
# - a damaged plan (a flipped byte, a truncated file) exits 1 with a message.
# Usage: plan_inspect_test.sh KILN MODEL_DIR   (needs NVRTC: a CUDA toolkit)
set -u
kiln=$1
model=$2/small.onnx
. "$(dirname "$0")/lib.sh"

"$kiln" compile "$model" --target sm_90 --json "$dir/compile.json" -o "$dir/m90.plan" >"$out" 2>&1 ||
  fail "compile sm_90 exit $?"
"$kiln" inspect "$dir/m90.plan" --json "$dir/i90.json" >"$out" 2>&1 || fail "inspect sm_90 exit $?"
for line in 'target: sm_90, precision: fp32' 'archs: sm_90 (CUBIN + PTX per kernel)' 'launches (' \
            'memory plan: arena ' 'inputs:' 'outputs:' 'weights: '; do
  grep -qF "$line" "$out" || fail "inspect sm_90 lacks: $line"
done
python3 - "$dir/m90.plan" "$dir/i90.json" "$dir/compile.json" <<'PY' || fail "sm_90 report does not match the plan"
import json, struct, sys
plan, rep, comp = open(sys.argv[1], "rb").read(), json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
# The launches section (id 5), read here without kiln's code.
count = struct.unpack_from("<I", plan, 24)[0]
sections = {}
for i in range(count):
    sid, _, off, size, _ = struct.unpack_from("<IIQQQ", plan, 40 + 32 * i)
    sections[sid] = (off, size)
off, size = sections[5]
n = struct.unpack_from("<Q", plan, off)[0]
at, steps = off + 8, []
for _ in range(n):
    kind, node, kernel = struct.unpack_from("<BII", plan, at); at += 9
    dims = struct.unpack_from("<6I", plan, at); at += 24
    shared, nargs = struct.unpack_from("<IQ", plan, at); at += 12 + nargs * 29
    steps.append((kind, kernel, list(dims[:3]), list(dims[3:]), shared))
assert at == off + size, (at, off + size)
launches = rep["launches"]
assert len(launches) == len(steps) and steps, (len(launches), len(steps))
names = [k["name"] for k in rep["kernels"]]
for l, (kind, kernel, grid, block, shared) in zip(launches, steps):
    assert kind == 0 and l["kind"] == "kernel", l
    assert l["kernel"] == names[kernel] and l["grid"] == grid and l["block"] == block, (l, grid, block)
    assert l["dynamic_shared_bytes"] == shared, l
ptxas = {k["name"]: k for k in comp["kernels_detail"]}
assert sorted(ptxas) == sorted(names), (sorted(ptxas), names)
for k in rep["kernels"]:
    assert k["registers"] > 0, k
    assert k["registers"] == ptxas[k["name"]]["registers"] == k["cubin_registers"], (k, ptxas[k["name"]])
    assert k["static_shared_bytes"] == ptxas[k["name"]]["shared_bytes"], k
    assert k["spill_bytes"] == ptxas[k["name"]]["spill_bytes"], k
    assert k["launches"] == sum(1 for l in launches if l["kernel"] == k["name"]), k
assert rep["gpu_kernels"] is True and rep["archs"] == ["sm_90"], rep["archs"]
assert [i["name"] for i in rep["inputs"]] == ["x"] and rep["inputs"][0]["shape"] == [2, 3, 8], rep["inputs"]
assert rep["memory"]["live_peak_bytes"] >= 0 and len(rep["memory"]["values"]) > 0, rep["memory"]
print(f"{len(names)} kernels, {len(steps)} launches match")
PY

"$kiln" compile "$model" --target cpu -o "$dir/cpu.plan" >"$out" 2>&1 || fail "compile cpu exit $?"
"$kiln" inspect "$dir/cpu.plan" --json "$dir/icpu.json" >"$out" 2>&1 || fail "inspect cpu exit $?"
for line in 'target: cpu, precision: fp32' 'archs: none' \
            'GPU kernels: none: compiled for target cpu (use --target auto, portable or sm_XX for GPU kernels)' \
            'CPU reference path' 'memory plan: arena '; do
  grep -qF "$line" "$out" || fail "inspect cpu lacks: $line"
done
grep -q '^kernels' "$out" && fail "a CPU plan lists kernels"
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert r['gpu_kernels'] is False and r['kernels'] == [] and r['launches'] == [], r
assert 'target cpu' in r['no_gpu_reason'] and [o['name'] for o in r['outputs']] == ['y', 't', 'm'], r
" "$dir/icpu.json" || fail "cpu JSON"

# Damaged plans: one byte flipped inside a section, and a truncated file.
python3 - "$dir/m90.plan" "$dir/flipped.plan" "$dir/short.plan" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 0x40
open(sys.argv[2], "wb").write(b)
open(sys.argv[3], "wb").write(b[:len(b) // 3])
PY
"$kiln" inspect "$dir/flipped.plan" >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "damaged plan: exit $rc, expected 1"
grep -Eq "^error: .*flipped.plan: section '[a-z]+' is corrupt: xxh64 is" "$out" || fail "damaged plan message"
"$kiln" inspect "$dir/short.plan" >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "truncated plan: exit $rc, expected 1"
grep -q "short.plan: truncated: the header says the plan has" "$out" || fail "truncated plan message"
echo PASS
