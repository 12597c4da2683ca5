#!/usr/bin/env bash
# kiln against PyTorch on one GPU (issue 6), every figure from one run:
#   bench/gpu.sh [--models resnet50,bert_base,...] [--out FILE] [--quick]
# On the device machine (PyTorch, torchvision, transformers, a GPU): exports
# the five models with random weights, then times kiln, PyTorch eager (fp16,
# cuDNN benchmark on) and torch.compile(mode="max-autotune") at batch 1
# (latency) and at a large batch (throughput, with GPU power), and the micro
# benchmarks (GEMM 4096^3, ResNet-50 stage-3 conv, softmax/layernorm on 32 MB
# against device-to-device copy). Prints a table and writes
# bench/results/<date>-<gpu>.json (docs/benchmarks.md describes every key).
#
#   bench/gpu.sh --dry-run [--models ...] [--out FILE]
# On a machine without a GPU: exercises the same harness with kiln's
# reference backend (CPU) on the prepared test models (build/models) at
# batch 1 and on scaled-down micro benchmarks, and prints the table with the
# GPU columns empty. It writes no file under bench/results (default --out:
# $TMPDIR/kiln-gpu-dry-run.json), and no figure in it is a GPU figure.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${KILN_BENCH_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x .venv/bin/python ] && .venv/bin/python -c "import numpy, onnx" 2>/dev/null; then py=.venv/bin/python
  else py=python3; fi
fi
exec env PYTHONUNBUFFERED=1 "$py" -m bench.gpubench "$@"
