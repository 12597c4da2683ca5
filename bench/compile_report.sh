#!/usr/bin/env bash
# Compile figures for the real models (issue 3): kernels, memory plan, compile time.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/prepare_models.sh build/models >/dev/null
exec .venv/bin/python bench/compile_report.py "$@"
