#!/bin/sh
# kiln bench MODEL.plan on the runtime's reference backend: the summary lines
# are printed, the backend is named, --profile lists the plan's nodes and
# --export-json parses with matching figures. A plan cannot take --batch.
# Usage: plan_bench_test.sh KILN MODEL_DIR
set -u
kiln=$1
model=$2/small.onnx
. "$(dirname "$0")/lib.sh"

"$kiln" compile "$model" --target cpu -o "$dir/m.plan" >"$out" 2>&1 || fail "compile exit $?"
"$kiln" bench "$dir/m.plan" --backend ref --iterations 7 --warmup-ms 0 --profile --export-json "$dir/b.json" \
  >"$out" 2>&1 || fail "kiln bench exit $?"
for re in '^Plan: .*m\.plan \(kiln [0-9.]+, target cpu, precision fp32, no GPU kernels\)' \
          '^Backend: ref \(CPU reference path \(' '^Throughput: [0-9.]+ qps' \
          '^Latency: min = [0-9.]+ ms, max = [0-9.]+ ms, mean = [0-9.]+ ms, median = [0-9.]+ ms, percentile\(90%\) = [0-9.]+ ms, percentile\(95%\) = [0-9.]+ ms, percentile\(99%\) = [0-9.]+ ms' \
          '^Host CPU Time: min = ' '^GPU Compute Time: none \(CPU backend' '^Total Host Walltime: [0-9.]+ s for 7 iterations' \
          '^=== Profile \(3 nodes, 7 iterations\) ===' '^reduce_max +reduce_max +7 '; do
  grep -Eq "$re" "$out" || fail "output lacks /$re/"
done
python3 - "$dir/b.json" <<'PY' || fail "--export-json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["plan"] is True and d["backend"] == "ref" and d["backend_kind"] == "cpu", d
assert d["iterations"] == 7 and len(d["latency_samples_ms"]) == 7 and d["warmup_runs"] == 0, d
lat = d["latency_ms"]
assert 0 < lat["min"] <= lat["median"] <= lat["p90"] <= lat["max"], lat
assert abs(lat["min"] - min(d["latency_samples_ms"])) < 1e-9, lat
assert d["gpu_compute_ms"] is None and d["throughput_qps"] > 0, d
assert sorted(p["op"] for p in d["profile"]) == ["fused", "reduce_max", "transpose"], d["profile"]
assert all(p["calls"] == 7 for p in d["profile"]), d["profile"]
assert abs(sum(p["percent"] for p in d["profile"]) - 100) < 1e-6
PY
"$kiln" bench "$dir/m.plan" --batch 4 >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "--batch on a plan: exit $rc, expected 1"
grep -q "a plan's shapes are fixed when it is compiled" "$out" || fail "--batch message"
echo PASS
