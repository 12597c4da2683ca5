#!/usr/bin/env bash
# The first command on a fresh machine: installs what is missing, builds kiln
# into build/, then compiles and runs the bundled example model, printing its
# outputs' shapes, a checksum and the time taken.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
tools/build.sh
echo
echo "== kiln run examples/models/tiny_cnn.onnx"
build/bin/kiln run examples/models/tiny_cnn.onnx --iterations 10
