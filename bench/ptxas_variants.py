"""ptxas's registers and spills for a plan's SIMT GEMM/conv kernels, compiled
four ways with NVRTC (as kiln compiles them: codegen/nvrtc/nvrtc_compiler.cpp's
options): as planned (__launch_bounds__(256)), without a launch bound, with
__launch_bounds__(256, 1) (a minimum of one block per SM) and with
--maxrregcount=255. It shows whether anything caps the kernels' registers
(docs/performance.md, "The SIMT register figure").
Usage: kiln compile MODEL --target sm_80 --precision fp32 -o P.plan --dump-dir D
       ptxas_variants.py D/kernels [--arch sm_80] [--nvrtc /usr/local/cuda/lib64/libnvrtc.so]"""
import argparse
import ctypes
import glob
import os
import re


def compile_log(nv, source, options):
    prog = ctypes.c_void_p()
    if nv.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None) != 0:
        raise SystemExit("nvrtcCreateProgram failed")
    opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    rc = nv.nvrtcCompileProgram(prog, len(options), opts)
    size = ctypes.c_size_t()
    nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nv.nvrtcGetProgramLog(prog, log)
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    if rc != 0:
        raise SystemExit(f"NVRTC failed:\n{log.value.decode()}")
    text = log.value.decode()
    regs = re.search(r"Used (\d+) registers", text)
    spill = re.search(r"(\d+) bytes spill stores", text)
    return f"{regs.group(1) if regs else '?'} regs, {spill.group(1) if spill else '?'} B spilled"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels")
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--nvrtc", default="/usr/local/cuda/lib64/libnvrtc.so")
    ap.add_argument("--include", default="/usr/local/cuda/include")
    a = ap.parse_args()
    nv = ctypes.CDLL(a.nvrtc)
    base = ["--std=c++17", f"-arch={a.arch}", "-default-device", f"-I{a.include}", "-Xptxas", "-v"]
    print("kernel | tile | as planned | no bound | (256, 1) | maxrregcount=255")
    for path in sorted(glob.glob(os.path.join(a.kernels, "*.cu"))):
        name = os.path.basename(path)[:-3]
        src = open(path).read()
        bound = "__launch_bounds__(256)"
        if bound not in src or not (name.startswith("kiln_conv") or name.startswith("kiln_gemm")):
            continue
        tile = re.search(r"tile (\d+x\d+x\d+)", src)
        cells = [compile_log(nv, src, base), compile_log(nv, src.replace(bound + " ", ""), base),
                 compile_log(nv, src.replace(bound, "__launch_bounds__(256, 1)"), base),
                 compile_log(nv, src, base + ["--maxrregcount=255"])]
        print(f"{name} | {tile.group(1) if tile else '-'} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
