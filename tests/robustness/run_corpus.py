#!/usr/bin/env python3
"""Runs kiln on every case of the robustness corpus (make_corpus.py).

Usage: run_corpus.py KILN CORPUS [--no-memory-limit] [--timeout S] [--filter SUBSTR]

Each command (`kiln compile`, `kiln run`, `kiln conformance` for the valid
cases; `kiln run MODEL.plan` for the damaged plans, with the case's extra
environment, e.g. the fake CUDA driver on LD_LIBRARY_PATH) runs in its own process with a timeout and a memory limit
(RLIMIT_AS; --no-memory-limit under AddressSanitizer, which reserves terabytes
of address space; the cases that test running out of memory need the limit
and are not run then), under strace, and must:
  - error cases: exit with code 1 (not a signal, not 2 = internal error) and
    print an error message containing the case's expected substring;
  - valid cases: exit with code 0;
  - no_crash cases (random bit flips): exit with code 0 or 1;
  - never open a file outside the case's folder, other than the system's
    shared libraries and locale data and the libraries kiln links from other
    folders (ldd) (checked in strace's log of open/openat).
Standard library only. Exit code 0 when every case holds.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

MEMORY_LIMIT = 4 << 30  # bytes of address space per kiln process
# What the dynamic loader and the C/C++ runtimes open on their own.
SYSTEM_PREFIXES = ("/etc/ld.so.cache", "/lib/", "/lib64/", "/usr/lib/", "/usr/share/locale/", "/proc/", "/sys/",
                   "/dev/", "/etc/localtime", "/usr/share/zoneinfo/")


def library_dirs(kiln):
    """Folders of the shared libraries kiln links (ldd): loading them is not reading the model."""
    dirs = set()
    try:
        out = subprocess.run(["ldd", kiln], capture_output=True, text=True).stdout
    except OSError:
        return dirs
    for line in out.splitlines():
        for word in line.split():
            if word.startswith("/"):
                dirs.add(os.path.dirname(word) + os.sep)
                dirs.add(os.path.dirname(os.path.realpath(word)) + os.sep)
    return dirs


def is_library(path, lib_dirs):
    name = os.path.basename(path)
    return path.startswith(tuple(lib_dirs)) and (name.endswith(".so") or ".so." in name)


def nvrtc_search(path):
    """What a GPU compile may open outside the case: NVRTC is loaded with
    dlopen (not in ldd's list) after searching the toolkit's and the Python
    wheels' library folders, so shared libraries and those folders themselves."""
    name = os.path.basename(path)
    return name.endswith(".so") or ".so." in name or os.path.isdir(path)


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def opened_files(trace_path, cwd):
    """Paths successfully opened, from strace's log (relative ones resolved)."""
    paths = []
    with open(trace_path, errors="replace") as fh:
        for line in fh:
            if "open" not in line or '"' not in line:
                continue
            result = line.rsplit("=", 1)[-1].strip().split(" ")[0]
            if not result.lstrip("-").isdigit() or int(result) < 0:
                continue
            p = line.split('"', 2)[1]
            paths.append(os.path.normpath(os.path.join(cwd, p)))
    return paths


def run_one(args, case, command, corpus, tmp):
    d = os.path.join(corpus, case["name"])
    model = os.path.join(d, case.get("file", "model.onnx"))
    argv = [args.kiln, command, d if command == "conformance" else model] + case["args"]
    # The corpus tests the loader and the checks, not codegen: `kiln compile`
    # builds a CPU plan as it did before its default became --target auto.
    if command == "compile" and "--target" not in case["args"]:
        argv += ["--target", "cpu"]
    trace = os.path.join(tmp, "trace.txt")
    full = ["strace", "-f", "-qq", "-e", "trace=open,openat,openat2", "-e", "signal=none", "-o", trace] + argv
    # Sanitizer builds: a report aborts (a signal, never mistaken for exit
    # code 1); LeakSanitizer cannot run under ptrace (the unit tests check leaks).
    env = dict(os.environ, KILN_CACHE_DIR=os.path.join(tmp, "cache"),
               ASAN_OPTIONS="abort_on_error=1:detect_leaks=0",
               UBSAN_OPTIONS="abort_on_error=1:halt_on_error=1:print_stacktrace=1")
    env.update(case.get("env", {}))
    # Libraries a case's environment adds (the fake CUDA driver) are not the model.
    lib_dirs = set(args.lib_dirs)
    for folder in case.get("env", {}).get("LD_LIBRARY_PATH", "").split(":"):
        if folder:
            lib_dirs |= {folder.rstrip(os.sep) + os.sep, os.path.realpath(folder) + os.sep}
    try:
        p = subprocess.run(full, cwd=d, env=env, capture_output=True, text=True, errors="replace",
                           timeout=args.timeout, preexec_fn=None if args.no_memory_limit else limit_memory)
    except subprocess.TimeoutExpired:
        return f"timed out after {args.timeout} s"
    out = p.stdout + p.stderr
    problems = []
    kind = case["kind"]
    if p.returncode < 0:
        problems.append(f"killed by signal {-p.returncode}")
    elif kind == "error":
        if p.returncode != 1:
            problems.append(f"exit code {p.returncode}, expected 1")
        err = [l for l in p.stderr.splitlines() if l.startswith("error:")]
        if not err or not err[0][len("error:"):].strip():
            problems.append("no error message")
        elif case["expect"] not in p.stderr:
            problems.append(f"message lacks '{case['expect']}'")
    elif kind == "valid" and p.returncode != 0:
        problems.append(f"exit code {p.returncode}, expected 0")
    elif kind == "no_crash" and p.returncode not in (0, 1):
        problems.append(f"exit code {p.returncode}, expected 0 or 1")
    if os.path.exists(trace):
        for path in opened_files(trace, d):
            inside = path == d or path.startswith(d + os.sep) or path.startswith(tmp + os.sep)
            system = (path.startswith(SYSTEM_PREFIXES) or path == os.path.realpath(args.kiln)
                      or is_library(path, lib_dirs) or (case.get("gpu") and nvrtc_search(path)))
            if not inside and not system:
                problems.append(f"opened {path}, outside the case folder")
        os.remove(trace)
    else:
        problems.append("strace wrote no log")
    if problems:
        return "; ".join(problems) + "\n      " + out.strip().replace("\n", "\n      ")[:2000]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("corpus")
    ap.add_argument("--no-memory-limit", action="store_true")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    args.kiln = os.path.abspath(args.kiln)
    args.lib_dirs = library_dirs(args.kiln)
    if not shutil.which("strace"):
        sys.exit("run_corpus: strace is needed to check which files kiln opens (tools/install_deps.sh installs it)")
    corpus = os.path.abspath(args.corpus)
    with open(os.path.join(corpus, "cases.json")) as fh:
        cases = [c for c in json.load(fh) if args.filter in c["name"]]
    # strace must be able to trace here (ptrace may be forbidden in some containers).
    probe = subprocess.run(["strace", "-qq", "-e", "trace=openat", "-o", os.devnull, "true"], capture_output=True)
    if probe.returncode != 0:
        sys.exit(f"run_corpus: strace cannot trace processes here: {probe.stderr.decode().strip()}")
    failures, runs, skipped = 0, 0, 0
    with tempfile.TemporaryDirectory(prefix="kiln-robust-") as tmp:
        for case in cases:
            if args.no_memory_limit and case.get("needs_memory_limit"):
                # Under AddressSanitizer (no address-space limit) a failed
                # allocation is ASan's own fatal report, never std::bad_alloc,
                # and without the limit the run would really take the memory.
                skipped += 1
                print(f"skip {case['kind']:8} {case['name']}: needs the address-space limit (--no-memory-limit)")
                continue
            for command in case["commands"]:
                runs += 1
                problem = run_one(args, case, command, corpus, tmp)
                status = "ok" if problem is None else "FAIL"
                print(f"{status:4} {case['kind']:8} kiln {command:11} {case['name']}" + (f": {problem}" if problem else ""))
                failures += problem is not None
    print(f"{runs - failures} of {runs} runs as expected ({len(cases)} cases"
          + (f", {skipped} not run without the memory limit)" if skipped else ")"))
    return 1 if failures or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
