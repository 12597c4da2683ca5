#!/usr/bin/env python3
"""Runs every fenced code block marked runnable in README.md and docs/*.md and
checks it succeeds. A block is marked in its info string:

    ```sh runnable            must exit 0
    ```sh runnable exit=1     must exit 1 (e.g. kiln inspect on an unsupported model)

Each block runs with bash -e from the repository root, with the folder of the
kiln binary first on PATH and KILN_CACHE_DIR in a fresh temporary folder.
Usage: run_doc_blocks.py REPO_ROOT KILN_BINARY
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\S*)(.*)$")


def blocks(path):
    """(first line, info words, code) of every runnable block of `path`."""
    out, cur, info, start = [], None, None, 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line.rstrip("\n"))
            if cur is None and m:
                words = (m.group(1) + " " + m.group(2)).split()
                cur, info, start = [], words, n + 1
            elif cur is not None and line.rstrip("\n") == "```":
                if "runnable" in info:
                    out.append((start, info, "".join(cur)))
                cur = None
            elif cur is not None:
                cur.append(line)
    return out


def main():
    root, kiln = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(kiln) + os.pathsep + env.get("PATH", "")
    ran = failed = 0
    with tempfile.TemporaryDirectory() as cache:
        env["KILN_CACHE_DIR"] = cache
        for path in files:
            if not os.path.exists(path):
                continue
            for line, info, code in blocks(path):
                want = 0
                for w in info:
                    if w.startswith("exit="):
                        want = int(w[5:])
                ran += 1
                p = subprocess.run(["bash", "-e", "-c", code], cwd=root, env=env, capture_output=True, text=True,
                                   timeout=600)
                where = f"{os.path.relpath(path, root)}:{line}"
                if p.returncode != want:
                    failed += 1
                    print(f"FAIL {where}: exit {p.returncode}, expected {want}\n--- block:\n{code}--- stdout:\n"
                          f"{p.stdout[-3000:]}--- stderr:\n{p.stderr[-3000:]}")
                else:
                    print(f"ok   {where}")
    print(f"{ran - failed} of {ran} runnable blocks succeeded")
    if ran == 0:
        print("FAIL: no runnable blocks found")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
