#!/usr/bin/env bash
# ctest `fresh_quickstart` (label fresh): the README's quick start on a fresh
# machine without a CUDA toolkit. The source tree (tracked and untracked, not
# ignored files: what a clone has) is copied into a bare Debian chroot
# (tests/bundle/chroot.sh: no compiler, no /usr/local/cuda), where
# tools/quickstart.sh installs the build packages with apt, NVRTC and the
# CUDA headers from PyPI wheels into .venv, builds the kiln target, and
# compiles the example into an sm_90 plan. Passes only if the plan holds GPU
# kernels (kiln inspect) and no CUDA toolkit was ever in the chroot.
#
# The chroot stays fresh, but its compiler outputs come from a ccache:
# KILN_FRESH_CCACHE is bind-mounted as the chroot's ccache. By default it is
# this machine's own ccache (`ccache --get-config cache_dir`), which the build
# that runs the tests has just filled. ccache keys an entry by the
# preprocessed source (or every header's contents) and the compiler, so an
# entry is used only where the chroot's Debian compiler and headers are the
# same as this machine's: on a cold CI machine about 211 of 218 objects come
# from the cache and the quick start takes about 45 s instead of 5-13 minutes
# of two cores (docs/testing.md); the objects that include the PyPI CUDA
# headers, and any that differ, are compiled in the chroot. Without ccache
# here: ~/.cache/kiln/fresh-ccache. KILN_FRESH_CCACHE=none (or empty): no
# ccache at all, the cold case, every object compiled in the chroot. The apt
# and pip downloads are kept in ~/.cache/kiln/fresh-apt and fresh-pip.
# Usage: fresh_test.sh SOURCE_DIR
set -euo pipefail
src=$(readlink -f "$1")
. "$src/tests/bundle/chroot.sh"
chroot_need_root
t0=$(date +%s)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-fresh-test.XXXXXX")
trap 'drop_chroot "$tmp/root"; rm -rf "$tmp"' EXIT
new_chroot "$tmp/root"
mkdir -p "$tmp/root/src"
# What a clone holds, plus untracked files not ignored (a worktree's .venv and
# build/models may be symbolic links, which .gitignore's "/.venv/" misses).
(cd "$src" && git ls-files -z -co --exclude-standard | grep -zv -e '^\.venv$' -e '^build' |
   xargs -0 tar -cf - --no-recursion) | tar -C "$tmp/root/src" -xf -
[ -e "$tmp/root/usr/local/cuda" ] && { echo "FAIL: the chroot has /usr/local/cuda"; exit 1; }
# Downloads (Debian packages, wheels) are cached beside it, so a warm run does
# not fetch them again; what is installed is the same.
for c in apt:/var/cache/apt/archives pip:/root/.cache/pip; do
  mkdir -p "$HOME/.cache/kiln/fresh-${c%%:*}" "$tmp/root${c#*:}"
  mount --bind "$HOME/.cache/kiln/fresh-${c%%:*}" "$tmp/root${c#*:}"
done
ccache_env="CCACHE_DISABLE=1"
if [ -z "${KILN_FRESH_CCACHE+set}" ]; then
  KILN_FRESH_CCACHE=$(ccache --get-config cache_dir 2>/dev/null || echo "$HOME/.cache/kiln/fresh-ccache")
fi
if [ -n "$KILN_FRESH_CCACHE" ] && [ "$KILN_FRESH_CCACHE" != none ]; then
  mkdir -p "$KILN_FRESH_CCACHE" "$tmp/root/ccache"
  mount --bind "$KILN_FRESH_CCACHE" "$tmp/root/ccache"
  ccache_env="CCACHE_DIR=/ccache CCACHE_BASEDIR=/src"
fi
echo "chroot and sources ready in $(( $(date +%s) - t0 )) s; ccache: ${KILN_FRESH_CCACHE:-none}"
t1=$(date +%s)
rc=0
KILN_CHROOT_ENV="$ccache_env KILN_JOBS=$(nproc)" in_chroot "$tmp/root" \
  'cd /src && tools/quickstart.sh && build/bin/kiln inspect build/tiny_cnn.plan' > "$tmp/quickstart.log" 2>&1 || rc=$?
cat "$tmp/quickstart.log"
echo "tools/quickstart.sh in the bare chroot: exit $rc, $(( $(date +%s) - t1 )) s (whole test $(( $(date +%s) - t0 )) s)"
((rc == 0)) || { echo "FAIL: the quick start failed"; exit 1; }
[ -e "$tmp/root/usr/local/cuda" ] && { echo "FAIL: the quick start installed a CUDA toolkit"; exit 1; }
grep -q "no CUDA toolkit" "$tmp/quickstart.log" || { echo "FAIL: the quick start did not take the PyPI path"; exit 1; }
grep -q "NVRTC: /src/.venv/" "$tmp/quickstart.log" || { echo "FAIL: kiln doctor did not find the wheel's NVRTC"; exit 1; }
kernels=$(grep -Eo 'GPU kernels: [0-9]+' "$tmp/quickstart.log" | tail -1 | grep -Eo '[0-9]+' || true)
[ "${kernels:-0}" -gt 0 ] || { echo "FAIL: the sm_90 plan has no GPU kernels"; exit 1; }
echo "ok: kiln built in a bare chroot from PyPI's NVRTC and CUDA headers; the sm_90 plan holds $kernels GPU kernels"
