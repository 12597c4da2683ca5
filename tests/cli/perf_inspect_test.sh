#!/bin/sh
# kiln inspect PLAN --perf (docs/performance.md) on perf_small.onnx compiled
# for sm_90 in fp16 (a GEMM + bias + ReLU kernel, a Tanh kernel):
# - the table and total print; --json holds a "perf" object whose launches
#   match the plan's launch list (blocks = grid product), whose GEMM has
#   2*M*N*K FLOPs, whose launches follow the DRAM and L2 formulas
#   recomputed here, and whose estimated_ms is the launches' sum plus one
#   graph-node overhead per step; bench/calibrate_perf_model.py's copy of the
#   model gives the same estimates;
# - --gpu h200 (faster memory) is no slower; the default GPU of sm_90 is h100;
# - user mistakes exit 1 with a message: an unknown --gpu, a GPU that cannot
#   run the plan (a100 for sm_90), a CPU plan, an .onnx model, --gpu without --perf.
# Usage: perf_inspect_test.sh KILN MODEL_DIR   (needs NVRTC: a CUDA toolkit)
set -u
kiln=$1
model=$2/perf_small.onnx
. "$(dirname "$0")/lib.sh"

"$kiln" compile "$model" --target sm_90 --precision fp16 -o "$dir/m.plan" >"$out" 2>&1 || fail "compile exit $?"
"$kiln" inspect "$dir/m.plan" --perf --json "$dir/h100.json" >"$out" 2>&1 || fail "inspect --perf exit $?"
cat "$out"
for line in 'gpu: h100 (NVIDIA H100 SXM5 80GB, sm_90): 132 SMs' 'target sm_90, precision fp16, batch 64' \
            'est_us' 'total: ' 'bounds: ' 'conv/GEMM/attention launches: 1;' \
            'filling >= 1 wave (blocks >= 132 SMs x resident blocks per SM): 0 (0%)' \
            ">= 1 block per SM (blocks >= 132 SMs, issue 18's measure of a full grid): 0 (0%)"; do
  grep -qF "$line" "$out" || fail "inspect --perf lacks: $line"
done
grep -q '^memory plan' "$out" && fail "--perf prints the plan listing too"
"$kiln" inspect "$dir/m.plan" --perf --gpu h200 --json "$dir/h200.json" >"$out" 2>&1 || fail "--gpu h200 exit $?"
python3 - "$dir/h100.json" "$dir/h200.json" <<'PY' || fail "perf JSON"
import json, math, sys
rep, h200 = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
p = rep["perf"]
c = p["constants"]
assert c["dram_gb_per_s"] == 3350 and 0 < c["dram_efficiency"] <= 1 and c["l2_gb_per_s"] > 0, c
assert p["gpu"] == "h100" and p["sms"] == 132 and p["batch"] == 64, p
assert len(p["launches"]) == len(rep["launches"]) >= 2, (len(p["launches"]), len(rep["launches"]))
for l, r in zip(p["launches"], rep["launches"]):
    assert l["step"] == r["step"] and l["kernel"] == r["kernel"], (l, r)
    assert l["blocks"] == r["grid"][0] * r["grid"][1] * r["grid"][2], (l, r)
    assert l["threads"] == r["block"][0] * r["block"][1] * r["block"][2], (l, r)
    assert l["est_us"] > 0 and l["bound"] in ("compute", "memory", "l2", "latency", "launch"), l
    # The largest term, then a folded split's tail and the GEMM epilogue (docs/performance.md).
    body = max(l["compute_us"], l["memory_us"], l["l2_us"], l["latency_us"])
    assert math.isclose(l["est_us"], body + l["tail_us"] + l["epilogue_us"], rel_tol=1e-12), l
    assert math.isclose(l["waves"], l["blocks"] / (132 * l["blocks_per_sm"])), l
    assert l["waves_run"] == math.ceil(l["waves"] - 1e-12), l
    # bytes / (3350 GB/s x the DRAM efficiency x the share of SMs with a block)
    want = l["bytes"] / (3350e9 * c["dram_efficiency"] * min(l["blocks"], 132) / 132) * 1e6
    assert math.isclose(l["memory_us"], want, rel_tol=1e-9), (l, want)
    if l.get("tile"):  # GEMM/conv: every block's A and B panels through L2 at the L2 rate
        t = l["tile"]
        l2 = l["blocks"] * 2 * t["k_tiles"] * t["bk"] * (t["bm"] + t["bn"])
        assert math.isclose(l["l2_bytes"], l2, rel_tol=1e-12), (l, l2)
        want = l2 / (c["l2_gb_per_s"] * 1e9 * min(l["blocks"], 132) / 132) * 1e6
        assert math.isclose(l["l2_us"], want, rel_tol=1e-9), (l, want)
gemm = [l for l in p["launches"] if l["kind"] == "gemm"]
assert len(gemm) == 1 and gemm[0]["flops"] == 2 * 64 * 128 * 256, gemm
assert gemm[0]["math"] == "fp16-tc" and gemm[0]["tile"]["k_tiles"] > 0, gemm
assert gemm[0]["epilogue_us"] > 0, gemm  # the tensor-core GEMM states its epilogue accesses
tanh = [l for l in p["launches"] if l["kind"] == "other"]
assert tanh and all(l["bytes"] > 0 for l in tanh), tanh
assert p["heavy_launches"] == 1, p
total = sum(l["est_us"] for l in p["launches"]) + len(p["launches"]) * p["graph_node_overhead_us"]
assert math.isclose(p["estimated_ms"] * 1e3, total, rel_tol=1e-9), (p["estimated_ms"], total)
assert h200["perf"]["gpu"] == "h200" and h200["perf"]["estimated_ms"] <= p["estimated_ms"], h200["perf"]
print(f'{len(p["launches"])} launches, {p["estimated_ms"] * 1e3:.2f} us on h100')
PY
# bench/calibrate_perf_model.py fits the model's constants with its own copy
# of the model: it must give kiln's estimates (docs/perf_calibration.md).
python3 "$2/../../bench/calibrate_perf_model.py" check "$dir/h100.json" "$dir/h200.json" >"$out" 2>&1 ||
  { cat "$out"; fail "bench/calibrate_perf_model.py check: the fit's model is not kiln's"; }

expect_error "--gpu v100: not a GPU kiln's performance model knows (known: h100, h200, a100, l4)" \
  inspect "$dir/m.plan" --perf --gpu v100
expect_error "--gpu a100 (sm_80):" inspect "$dir/m.plan" --perf --gpu a100
expect_error "--gpu names the GPU for --perf; add --perf" inspect "$dir/m.plan" --gpu h100
expect_error "--perf and --gpu model a compiled plan; compile it first" inspect "$model" --perf
"$kiln" compile "$model" --target cpu -o "$dir/cpu.plan" >"$out" 2>&1 || fail "compile cpu exit $?"
expect_error "--perf models GPU kernels, and this plan has none" inspect "$dir/cpu.plan" --perf
echo "ok"
