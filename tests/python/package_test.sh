#!/bin/sh
# Issue 16 item 9: `pip install .` from the repository root works from a
# read-only checkout (the build happens out of tree), shows the build's
# progress, and installs a kiln package that compiles and runs a model.
# Slow: it builds kiln's libraries from scratch (see docs/python.md for the
# time), so it has its own label, python_package.
# Usage: package_test.sh SOURCE_DIR VENV_PYTHON
set -u
src=$1
py=$2
dir=$(mktemp -d)
trap 'chmod -R u+w "$dir"; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; tail -n 40 "$dir/pip.log" 2>/dev/null; exit 1; }

# A read-only copy of the tracked files: any write into the source fails the build.
mkdir "$dir/src"
(cd "$src" && git ls-files -z | xargs -0 cp --parents -t "$dir/src") || fail "copying the checkout"
chmod -R a-w "$dir/src"
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=${KILN_JOBS:-2} "$py" -m pip install -v --no-deps --target "$dir/site" "$dir/src" \
  >"$dir/pip.log" 2>&1 || fail "pip install . exit $?"
echo "pip install: $(( $(date +%s) - start )) s"
# Progress: CMake's configure and the compiler's lines reach the user (-v, build.verbose).
grep -q -- '-- Configuring done' "$dir/pip.log" || fail "no CMake configure output"
# (ninja's "[12/178] g++ ..." or make's "Building CXX object ...", whichever CMake generates for)
grep -Eq '^ *\[[0-9]+/[0-9]+\] |Building CXX object' "$dir/pip.log" || fail "no build progress lines"

cd "$dir"
PYTHONPATH="$dir/site" "$py" - "$src/examples/models/tiny_cnn.onnx" "$dir/site" <<'PYEOF' || fail "the installed package does not work"
import sys
import numpy as np
import kiln
assert kiln.__file__.startswith(sys.argv[2]), kiln.__file__  # the installed copy, not a build tree
eng = kiln.compile(sys.argv[1], shapes={"input": [1, 3, 32, 32]})
out = eng.run({"input": np.zeros((1, 3, 32, 32), np.float32)})
assert out["probs"].shape == (1, 10), out
print("installed kiln", kiln.__version__, "from", kiln.__file__, "runs:", eng.info)
PYEOF
echo "python package: OK"
