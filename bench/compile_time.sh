#!/usr/bin/env bash
# Compile time of a model with an empty kernel cache (every kernel through
# NVRTC) and with a warm one (issue 4: ResNet-50 fp16 for sm_90 under 30 s
# cold and 2 s warm on the 2-core dev machine). Both runs go one after the
# other in this invocation, so they see the same machine load.
#   bench/compile_time.sh [MODEL.onnx] [--precision fp16] [--target sm_90]
# Prints both times and writes bench/results/compile-time-<date>-<model>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-build/models/resnet50/model.onnx}
shift || true
precision=fp16 target=sm_90
while [ $# -gt 0 ]; do
  case $1 in
    --precision) precision=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 1 ;;
  esac
done
[ -f "$model" ] || tools/prepare_models.sh build/models >/dev/null
kiln=${KILN:-build/bin/kiln}
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
run() {  # $1: label; prints wall seconds, writes the compile JSON to $cache/$1.json
  local t0 t1
  t0=$EPOCHREALTIME
  "$kiln" compile "$model" --precision "$precision" --target "$target" --cache-dir "$cache/kernels" \
    --json "$cache/$1.json" 2> "$cache/$1.log" || { cat "$cache/$1.log" >&2; exit 1; }
  t1=$EPOCHREALTIME
  python3 -c "print(round($t1 - $t0, 3))"
}
cold=$(run cold)
warm=$(run warm)
name=$(basename "$(dirname "$model")")
out=bench/results/compile-time-$(date +%F)-$name.json
python3 - "$cache" "$cold" "$warm" "$model" "$precision" "$target" "$out" <<'PY'
import json, os, subprocess, sys
cache, cold, warm, model, precision, target, out = sys.argv[1:]
c = json.load(open(os.path.join(cache, "cold.json")))
w = json.load(open(os.path.join(cache, "warm.json")))
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
r = {"model": model, "precision": precision, "target": target, "commit": commit,
     "machine": f"{os.cpu_count()} CPUs, no GPU",
     "cold_s": round(float(cold), 2), "warm_s": round(float(warm), 2),
     "kernels_distinct": c.get("kernels_distinct"), "nvrtc_compilations_cold": c.get("nvrtc_compilations"),
     "cache_hits_warm": w.get("cache_hits"), "nvrtc_s_cold": c.get("seconds"),
     "import_ms": c.get("import_ms"), "max_registers": c.get("max_registers"), "spill_bytes": c.get("spill_bytes"),
     "nodes_without_kernels": len(c.get("nodes_without_kernels", []))}
json.dump(r, open(out, "w"), indent=2)
print(f"{model} {precision} {target}: cold {r['cold_s']} s ({r['nvrtc_compilations_cold']} NVRTC compilations of "
      f"{r['kernels_distinct']} kernels), warm {r['warm_s']} s ({r['cache_hits_warm']} cache hits); "
      f"max {r['max_registers']} registers, {r['spill_bytes']} spill bytes; "
      f"{r['nodes_without_kernels']} nodes without a kernel emitter")
print(f"wrote {out}")
PY
