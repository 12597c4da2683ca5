#!/bin/sh
# kiln bench on ResNet-50 (reference backend, few iterations): the summary
# lines are printed, the profile lists nodes, and --export-json parses.
# Usage: bench_test.sh KILN MODEL.onnx
set -u
kiln=$1
model=$2
out=$(mktemp)
json=$(mktemp)
trap 'rm -f "$out" "$json"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }
[ -f "$model" ] || fail "missing $model (tools/prepare_models.sh)"

"$kiln" bench "$model" --backend ref --iterations 2 --warmup-ms 0 --profile --export-json "$json" >"$out" 2>&1 ||
  fail "kiln bench exit $?"
for re in '^Backend: ref \(CPU reference executor: a CPU backend' '^Throughput: [0-9.]+ qps' \
          '^Latency: min = [0-9.]+ ms, max = [0-9.]+ ms, mean = [0-9.]+ ms, median = [0-9.]+ ms, percentile\(90%\) = [0-9.]+ ms, percentile\(95%\) = [0-9.]+ ms, percentile\(99%\) = [0-9.]+ ms' \
          '^Host CPU Time: min = ' '^Total Host Walltime: ' '^=== Profile \([0-9]+ nodes, 2 iterations\) ===' \
          '^/conv1/Conv \+ 2 more +fused +2 '; do
  grep -Eq "$re" "$out" || fail "output lacks /$re/"
done
python3 - "$json" <<'PY' || fail "--export-json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["backend"] == "ref" and d["iterations"] == 2, d
lat = d["latency_ms"]
assert 0 < lat["min"] <= lat["median"] <= lat["max"], lat
assert len(d["latency_samples_ms"]) == 2
assert d["throughput_qps"] > 0
assert sum(p["calls"] for p in d["profile"]) == 2 * len(d["profile"])
assert abs(sum(p["percent"] for p in d["profile"]) - 100) < 1e-6
PY
echo PASS
