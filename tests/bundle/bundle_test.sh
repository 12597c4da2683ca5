#!/usr/bin/env bash
# ctest `bundle_dry_run` (label bundle): the device bundle rehearses the first
# GPU run where nothing of kiln's build is installed. bench/device_bundle.sh
# packs build/ (with NVRTC and one prepared real model, MobileNetV2: the
# chroot has no Python to rebuild them), the bundle is copied into a bare
# Debian chroot (tests/bundle/chroot.sh), which is checked to have no
# compiler, Python, CMake or CUDA, and bench/gpu_run_all.sh --dry-run runs
# there against the strict fake driver. Passes only if the dry run passes and
# says everywhere that it is one.
# Usage: bundle_test.sh SOURCE_DIR BUILD_DIR   (KILN_BUNDLE_SUITES: the
# conformance suites, default all of them)
set -euo pipefail
src=$(readlink -f "$1") build=$(readlink -f "$2")
. "$src/tests/bundle/chroot.sh"
chroot_need_root
t0=$(date +%s)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-bundle-test.XXXXXX")
trap 'drop_chroot "$tmp/root"; rm -rf "$tmp"' EXIT
"$src/bench/device_bundle.sh" --build "$build" --out "$tmp/bundle" --with-nvrtc --models mobilenet_v2
new_chroot "$tmp/root"
t1=$(date +%s)
echo "bundle and chroot ready in $((t1 - t0)) s"
cp -a "$tmp/bundle" "$tmp/root/opt/kiln-bundle"
in_chroot "$tmp/root" 'for c in cc gcc g++ clang python3 python cmake nvcc protoc; do
    if command -v $c >/dev/null; then echo "FAIL: the chroot is not bare: it has $c"; exit 1; fi; done
  for d in /usr/local/cuda /usr/include/onnx /usr/include/google/protobuf /usr/share/libonnx-testdata; do
    if [ -e $d ]; then echo "FAIL: the chroot is not bare: it has $d"; exit 1; fi; done
  echo "chroot: bare (no compiler, Python, CMake, CUDA or kiln dependency)"'
suites=${KILN_BUNDLE_SUITES:-node,pytorch-converted,pytorch-operator,simple,real}
rc=0
in_chroot "$tmp/root" "/opt/kiln-bundle/gpu_run_all.sh --dry-run --suites $suites --out /tmp/dry-run" || rc=$?
echo "dry run in the chroot: exit $rc, $(( $(date +%s) - t1 )) s (whole test $(( $(date +%s) - t0 )) s)"
res=$tmp/root/tmp/dry-run
[ "$rc" -eq 0 ] || { echo "FAIL: the dry run failed in the chroot"; exit 1; }
grep -q '"dry_run": true' "$res/summary.json" || { echo "FAIL: summary.json does not say dry_run"; exit 1; }
grep -q '^kiln gpu_run_all: DRY RUN' "$res/summary.txt" || { echo "FAIL: summary.txt does not say DRY RUN"; exit 1; }
for s in doctor conformance models; do
  grep -q "\"name\": \"$s\", \"status\": \"pass\"" "$res/summary.json" || { echo "FAIL: step $s did not pass"; exit 1; }
done
launched=$(grep -c '^launched' "$res/conformance.tsv" || true)
[ "$launched" -gt 0 ] || { echo "FAIL: no conformance plan launched on the fake driver"; exit 1; }
# MobileNetV2 at fp32 and fp16: both plans must have run on the fake driver.
[ "$(grep -c '^launched' "$res/models.tsv")" -eq 2 ] || { echo "FAIL: a model plan did not launch"; cat "$res/models.tsv"; exit 1; }
echo "ok: $launched conformance plans and $(grep -c '^launched' "$res/models.tsv") model plans launched on the fake driver from the bundle in a bare chroot"
