"""The CLI and Python compile through one entry (compiler/compile_model.h):
for the same flags, `kiln compile -o` and kiln.compile(...).plan_bytes() give
byte-identical plans. Run by ctest (python_cli_plan_parity) as

    check_plan_parity.py KILN_BINARY MODEL:TARGET:PRECISION ...

with PYTHONPATH set to the build tree's python folder."""
import hashlib
import os
import subprocess
import sys
import tempfile

import kiln


def main() -> int:
    cli, cases = sys.argv[1], sys.argv[2:]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            model, target, precision = case.rsplit(":", 2)
            plan = os.path.join(tmp, "cli.plan")
            subprocess.run([cli, "compile", model, "--target", target, "--precision", precision, "-o", plan],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(plan, "rb") as f:
                from_cli = f.read()
            from_python = kiln.compile(model, precision=precision, target=target).plan_bytes()
            same = from_cli == from_python
            failed += not same
            print("{}: {} {} {}: cli {} ({} bytes), python {} ({} bytes)".format(
                "same" if same else "DIFFERENT", model, target, precision,
                hashlib.sha256(from_cli).hexdigest()[:16], len(from_cli),
                hashlib.sha256(from_python).hexdigest()[:16], len(from_python)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
