#!/bin/bash
# The runtime's GPU path on a real GPU (ctest label gpu): small ONNX node
# models (pointwise, reduction, softmax, layout, conv, GEMM, pool, norm) compiled to plans with GPU kernels (CUBIN for the device's arch when
# nvidia-smi reports it, and sm_80 PTX, JIT-compiled by the driver), run with
# `kiln run --backend gpu` (CUDA Graph replay, 3 iterations) and compared
# with `--backend ref` on the same seeded inputs. Exits 77 (ctest: skipped)
# when there is no CUDA driver or device.
# Then, on a real GPU only, --tune on tests/runtime/tuning_matmul.onnx.
#
# --expected (bench/gpu_lease.sh, whose bundle has no BLAS for the reference
# backend): each model runs on its test's own inputs and is compared with
# the test's expected outputs (gpu_test_expected.py), the tuned plan with
# ONNX Runtime's on the same inputs; PYTHON (default python3) needs numpy,
# onnx and onnxruntime. --backend sim runs the plans on the CPU simulator
# instead of the GPU: the comparisons themselves, checked without a GPU.
# Usage: gpu_test.sh KILN_BINARY [--expected] [--backend gpu|sim]
set -euo pipefail
kiln=$1
shift
oracle=ref backend=gpu
while (($#)); do
  case $1 in
    --expected) oracle=expected; shift ;;
    --backend) backend=$2; shift 2 ;;
    *) echo "gpu_test.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
py=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
data=${KILN_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}/node  # bench/gpu_run_all.sh passes a bundle's copy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
archs=sm_80
if cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1); then
  a=sm_${cc/./}
  case $a in sm_80|sm_86|sm_89|sm_90) archs="$a sm_80";; esac
fi
models="test_add_bcast test_relu test_sigmoid test_tanh test_softmax_axis_1 test_reduce_max_default_axes_keepdim_example
        test_transpose_default test_concat_2d_axis_0 test_where_example test_cast_FLOAT_to_FLOAT16
        test_basic_conv_with_padding test_matmul_2d test_gemm_default_no_bias test_maxpool_2d_default
        test_layer_normalization_4d_axis1"
n=0
for m in $models; do
  for arch in $archs; do
    plan=$tmp/$m.$arch.plan
    "$kiln" compile "$data/$m/model.onnx" --target "$arch" -o "$plan" 2>"$tmp/compile.txt"
    grep -q "GPU kernels: none" "$tmp/compile.txt" && { echo "FAIL: $m has no GPU kernels"; cat "$tmp/compile.txt"; exit 1; }
    ins=""
    if [ "$oracle" = expected ]; then
      for f in "$data/$m"/test_data_set_0/input_*.pb; do
        ins="$ins${ins:+,}$("$py" -c "import onnx, sys; print(onnx.load_tensor(sys.argv[1]).name)" "$f"):$f"
      done
    fi
    if ! "$kiln" run "$plan" --backend "$backend" --iterations 3 ${ins:+--inputs "$ins"} --outputs "$tmp/gpu" \
         >"$tmp/run.txt" 2>&1; then
      if grep -Eq "no CUDA driver|no CUDA device|does not start" "$tmp/run.txt"; then
        echo "skipped: $(cat "$tmp/run.txt")"
        exit 77
      fi
      echo "FAIL: $m ($arch):"; cat "$tmp/run.txt"; exit 1
    fi
    head -1 "$tmp/run.txt"
    grep -q "^backend: $backend" "$tmp/run.txt" || { echo "FAIL: $m ($arch) did not run on $backend"; cat "$tmp/run.txt"; exit 1; }
    if [ "$oracle" = expected ]; then
      "$py" "$here/gpu_test_expected.py" "$data/$m/test_data_set_0" "$tmp/gpu" "$m $arch" || exit 1
      rm -rf "$tmp/gpu"
      n=$((n + 1))
      continue
    fi
    "$kiln" run "$plan" --backend ref --outputs "$tmp/ref" >/dev/null
    python3 - "$tmp/gpu" "$tmp/ref" "$m $arch" <<'PY'
import os, struct, sys
def load(p):
    b = open(p, "rb").read()
    hl = struct.unpack("<H", b[8:10])[0]
    h = b[10:10 + hl].decode()
    return h.split("'descr': '")[1][:3], b[10 + hl:]
gpu, ref, what = sys.argv[1:]
for f in sorted(os.listdir(ref)):
    d, want = load(os.path.join(ref, f))
    d2, got = load(os.path.join(gpu, f))
    assert d == d2 and len(got) == len(want), (what, f, "dtype/size differ")
    if d in ("<f4", "<f2"):
        c = "f" if d == "<f4" else "e"
        n = len(want) // struct.calcsize(c)
        for i, (g, w) in enumerate(zip(struct.unpack("<%d%s" % (n, c), got), struct.unpack("<%d%s" % (n, c), want))):
            assert abs(g - w) <= 1e-5 + 1e-4 * abs(w) or g == w, (what, f, i, g, w)
    else:
        assert got == want, (what, f, "bytes differ")
PY
    rm -rf "$tmp/gpu" "$tmp/ref"
    n=$((n + 1))
  done
done
where=$( [ "$backend" = gpu ] && echo "the GPU" || echo "$backend")
echo "ok: $n plans on $where equal $( [ "$oracle" = expected ] && echo "the tests' expected outputs" || echo the reference)"

# Autotuning on the GPU (docs/tuning.md): --tune times the GEMM candidates of
# tests/runtime/tuning_matmul.onnx (fp16, tensor cores) for the device's arch,
# stores the winner, and the tuned plan equals the reference (fp16 bounds).
tuned_arch=${archs%% *}
if [ -n "${a:-}" ] && [ "$tuned_arch" = "$a" ]; then
  model=$(dirname "$0")/tuning_matmul.onnx
  "$kiln" compile "$model" --target "$tuned_arch" --precision fp16 --tune --tuning-cache "$tmp/tuning.json" \
    -o "$tmp/tuned.plan" 2>"$tmp/tune.txt" || { echo "FAIL: --tune:"; cat "$tmp/tune.txt"; exit 1; }
  grep "^tuned " "$tmp/tune.txt"
  grep -q '"problem": "f16:b1:m64:n80:k96"' "$tmp/tuning.json" || { echo "FAIL: no winner stored"; exit 1; }
  if [ "$oracle" = expected ]; then
    # The fp16 plan against ONNX Runtime's fp32 outputs on the same inputs.
    "$py" -c "
import sys, numpy as np, onnx
g = onnx.load(sys.argv[1]).graph
init = {i.name for i in g.initializer}
for k, i in enumerate(x for x in g.input if x.name not in init):
    s = [d.dim_value for d in i.type.tensor_type.shape.dim]
    np.save(sys.argv[2] + '/' + i.name + '.in.npy', np.random.default_rng(k).uniform(-1, 1, s).astype(np.float32))
    print(i.name + '=' + sys.argv[2] + '/' + i.name + '.in.npy')" "$model" "$tmp" > "$tmp/inputs.txt"
    "$kiln" run "$tmp/tuned.plan" --backend "$backend" --inputs "$(paste -sd, "$tmp/inputs.txt" | tr = :)" \
      --outputs "$tmp/gpu" >/dev/null
    # shellcheck disable=SC2046
    "$py" "$here/gpu_test_expected.py" --ort "$model" "$tmp/gpu" "tuned plan" 2e-3,2e-3 $(cat "$tmp/inputs.txt") || exit 1
    echo "ok: the tuned plan on $where equals ONNX Runtime"
    exit 0
  fi
  "$kiln" run "$tmp/tuned.plan" --backend gpu --outputs "$tmp/gpu" >/dev/null
  "$kiln" run "$tmp/tuned.plan" --backend ref --outputs "$tmp/ref" >/dev/null
  python3 - "$tmp/gpu/y.npy" "$tmp/ref/y.npy" <<'PY'
import struct, sys
def load(p):
    b = open(p, "rb").read()
    hl = struct.unpack("<H", b[8:10])[0]
    d = b[10 + hl:]
    return struct.unpack("<%df" % (len(d) // 4), d)
for i, (g, w) in enumerate(zip(load(sys.argv[1]), load(sys.argv[2]))):
    assert abs(g - w) <= 2e-3 + 2e-3 * abs(w), ("tuned plan", i, g, w)
PY
  echo "ok: the tuned plan on the GPU equals the reference"
fi
