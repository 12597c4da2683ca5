#!/usr/bin/env bash
# Packs everything bench/gpu_run_all.sh needs into one folder that runs on a
# machine with none of kiln's build dependencies (the GPU machine: a CUDA 13
# driver, PyTorch, no package registry; or a bare Debian chroot, ctest label
# `bundle`). docs/benchmarks.md, "The first GPU run", says how to use it.
#
#   bench/device_bundle.sh [--build DIR] [--out DIR] [--with-nvrtc] [--models NAMES] [--no-testdata] [--lease [--limit-mib N]]
#
# --lease: the bundle of bench/gpu_lease.sh, which compares the GPU with the
# suites' expected outputs and ONNX Runtime, never with `kiln run --backend
# ref`: no BLAS (OpenBLAS and libgfortran, 11.5 MB gzipped, serve only the
# reference backend's GEMM and conv; such a run fails there, naming the
# library), and Debian's 1.12 suites (node, pytorch-*, simple; not `real`)
# as data/onnx-testdata-1.12.tar.xz. The device copies the git tree plus the
# carried bundle and takes at most 64 MiB: the script prints both sizes and
# refuses (exit 1, no bundle left) a bundle that would pass the limit
# (--limit-mib, default 64: the device tool's, /work/.library/device/README.md). The
# lease runs from the tree: the models' skeletons are not copied again.
#
# The folder (default .devbundle/, ignored by git, so it travels with
# run(carry=[".devbundle"])) holds:
#   bin/kiln          a wrapper that runs bin/kiln.bin with lib/ first on the
#                     library path (for kiln's process alone: PyTorch keeps its
#                     own); files over 1 MB are gzipped, the wrapper unpacks them
#   lib/              the ldd closure of kiln (and of the BLAS it dlopens), less glibc
#                     (the machine's own; kiln.bin needs the GLIBC version in
#                     MANIFEST) and the CUDA driver (the machine's; NVRTC is
#                     dlopen'ed, never linked)
#   fake_cuda/        the strict fake driver, for gpu_run_all.sh --dry-run
#   data/onnx-testdata.tar.gz   Debian's ONNX conformance suites (not with
#                     --no-testdata: the device's 64 MiB limit; gpu_run_all.sh
#                     --testdata names another copy)
#   models/           the real models' skeletons and prepare_models.py (the
#                     GPU machine rebuilds them with its numpy/onnx/onnxruntime);
#                     --models copies prepared folders from DIR/models too
#   nvrtc/            --with-nvrtc: NVRTC and the CUDA headers kernels include,
#                     for a machine without them (the chroot; the GPU machine
#                     has its own)
#   gpu_run_all.sh, gpu.sh + gpubench/, gpu_test.sh, tuning_matmul.onnx, MANIFEST
set -euo pipefail
cd "$(dirname "$0")/.."
build=build out=.devbundle nvrtc=0 models="" testdata_tar=1 lease=0 limit_mib=64
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --with-nvrtc) nvrtc=1; shift ;;
    --models) models=${2//,/ }; shift 2 ;;
    --no-testdata) testdata_tar=0; shift ;;
    --lease) lease=1; shift ;;
    --limit-mib) limit_mib=$2; shift 2 ;;
    -h|--help) sed -n '2,42p' "$0"; exit 0 ;;
    *) echo "device_bundle.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done
kiln=$build/bin/kiln
fake=$build/lib/fake_cuda/libcuda.so.1
[ -x "$kiln" ] || { echo "device_bundle.sh: no $kiln: build first (tools/build.sh)" >&2; exit 1; }
[ -f "$fake" ] || { echo "device_bundle.sh: no $fake: build the fake driver (cmake --build $build --target kiln_fake_cuda)" >&2; exit 1; }
testdata=/usr/share/libonnx-testdata/data
((testdata_tar == 0)) || [ -d "$testdata" ] || { echo "device_bundle.sh: no $testdata (Debian package libonnx-testdata)" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out"/{bin,lib,fake_cuda,data,models,bench}
cp "$kiln" "$out/bin/kiln.bin"
cp "$fake" "$out/fake_cuda/"

# The closure of kiln's NEEDED libraries (ldd resolves it transitively), and
# of the BLAS library kiln loads on its first reference GEMM (by the soname
# the build recorded, ops/blas_library.h; not in NEEDED). glibc's libraries
# must come from the machine (they go with its ld.so); the driver and NVRTC
# are the machine's too.
# --lease leaves the BLAS out (the lease path never runs the reference backend).
blas=""
if ((lease == 0)); then
  blas_soname=$(sed -n 's/^KILN_BLAS_SONAME:INTERNAL=//p' "$build/CMakeCache.txt")
  blas=$(ldconfig -p | awk -v n="$blas_soname" '$1 == n && $NF ~ /^\// {print $NF; exit}')
  [ -n "$blas" ] || { echo "device_bundle.sh: BLAS library '$blas_soname' (KILN_BLAS_SONAME in $build/CMakeCache.txt) not found by ldconfig" >&2; exit 1; }
fi
{ [ -z "$blas" ] || { echo "x => $blas (0)"; ldd "$blas"; }; ldd "$kiln"; } | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case $(basename "$lib") in
    ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libutil.so*) ;;
    libcuda.so*|libnvrtc*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
cat > "$out/bin/kiln" <<'WRAP'
#!/bin/sh
# kiln from the bundle: its own libraries first, for this process only. The
# large files travel gzipped (the device's 64 MiB limit) and are unpacked on
# the first run (each by a rename, so concurrent first runs are safe).
here=$(dirname "$(readlink -f "$0")")
for z in "$here/kiln.bin.gz" "$here"/../lib/*.gz; do
  if [ -f "$z" ] && [ ! -f "${z%.gz}" ]; then
    gzip -dc "$z" > "${z%.gz}.$$" && chmod +x "${z%.gz}.$$" && mv -f "${z%.gz}.$$" "${z%.gz}" || exit 2
  fi
done
LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/kiln.bin" "$@"
WRAP
chmod +x "$out/bin/kiln"

if ((testdata_tar && lease)); then
  # xz: 5.8 MB where gzip takes 8.8 (the 64 MiB limit); gpu_lease.sh unpacks
  # it with Python's tarfile (the device may have no xz tool).
  tar -C "$testdata/.." -cf - data/node data/pytorch-converted data/pytorch-operator data/simple |
    xz -9 -T1 > "$out/data/onnx-testdata-1.12.tar.xz"
elif ((testdata_tar)); then
  tar -C "$testdata/.." -czf "$out/data/onnx-testdata.tar.gz" data
fi
# The lease runs from the tree, which holds the skeletons already.
((lease)) || cp tests/models/*.skeleton.onnx tests/models/prepare_models.py "$out/models/"
for m in $models; do
  [ -f "$build/models/$m/model.onnx" ] || { echo "device_bundle.sh: no prepared $build/models/$m (tools/prepare_models.sh)" >&2; exit 1; }
  mkdir -p "$out/models/prepared"
  cp -rL "$build/models/$m" "$out/models/prepared/"
done

if ((nvrtc)); then
  # From the toolkit kiln was built against, else the nvidia-cuda-nvrtc and
  # nvidia-cuda-runtime wheels in .venv (tools/quickstart.sh).
  libdir="" incdir=""
  for d in /usr/local/cuda/lib64 .venv/lib/python3*/site-packages/nvidia/cu13/lib; do
    [ -f "$d/libnvrtc.so.13" ] && { libdir=$d; break; }
  done
  for d in /usr/local/cuda/include .venv/lib/python3*/site-packages/nvidia/cu13/include; do
    [ -f "$d/cuda_fp16.h" ] && { incdir=$d; break; }
  done
  [ -n "$libdir" ] && [ -n "$incdir" ] || { echo "device_bundle.sh: --with-nvrtc: no libnvrtc.so.13 / cuda_fp16.h found" >&2; exit 1; }
  mkdir -p "$out/nvrtc/lib" "$out/nvrtc/include"
  cp -L "$libdir"/libnvrtc.so.13 "$libdir"/libnvrtc-builtins.so.13.* "$out/nvrtc/lib/"
  # Kernels include cuda_fp16.h and cuda_bf16.h, which include more of the
  # folder; all of it but CCCL (17 MB of C++ library kernels do not use).
  for f in "$incdir"/*; do [ "$(basename "$f")" = cccl ] || cp -rL "$f" "$out/nvrtc/include/"; done
  [ -f "$out/nvrtc/include/cuda_fp16.h" ] || { echo "device_bundle.sh: could not copy the CUDA headers from $incdir" >&2; exit 1; }
fi

cp bench/gpu_run_all.sh bench/gpu_run_all_compare.py bench/gpu.sh "$out/"
cp -r bench/gpubench "$out/bench/"
rm -rf "$out/bench/gpubench/__pycache__"
cp tests/runtime/gpu_test.sh tests/runtime/tuning_matmul.onnx "$out/bench/"

glibc=$(objdump -T "$kiln" "$out"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
# Binaries over 1 MB travel gzipped (bin/kiln unpacks them): 66 MB -> 30 MB.
strip --strip-unneeded "$out/bin/kiln.bin" "$out/lib/libkiln_runtime.so"* 2>/dev/null || true
find "$out/bin" "$out/lib" -type f -size +1M ! -name '*.gz' -exec gzip -9 {} +
{
  echo "kiln device bundle"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m)"
  echo "needs: $glibc or newer (glibc from the machine), a CUDA driver (libcuda.so.1) for GPU runs"
  echo "blas: $( ((lease)) && echo "none (--lease: kiln run --backend ref fails on a GEMM or conv, naming the library)" || echo "$(basename "$blas")")"
  echo "nvrtc: $( ((nvrtc)) && echo "bundled (nvrtc/)" || echo "the machine's (KILN_NVRTC_LIBRARY, CUDA_PATH, a nvidia-cuda-nvrtc wheel)")"
  (cd "$out" && find . -type f | sort | xargs du -k | awk '{print $1 " KiB  " $2}')
} > "$out/MANIFEST"
echo "$out: $(du -sh "$out" | cut -f1) (kiln needs $glibc; $(ls "$out/lib" | wc -l) libraries)"

# What the device copies: the git tree (tracked files and untracked ones git
# does not ignore) plus the carried bundle, at most 64 MiB together.
limit=$((limit_mib << 20))
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
carried=$(du -sb "$out" | cut -f1)
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "tree $(mib "$tree") + bundle $(mib "$carried") = $(mib $((tree + carried))) of the device's $(mib "$limit")"
if ((lease && tree + carried > limit)); then
  echo "device_bundle.sh: the tree and the bundle would pass the device's $limit_mib MiB by $(mib $((tree + carried - limit))): bundle removed" >&2
  rm -rf "$out"
  exit 1
fi
