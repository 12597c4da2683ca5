"""Writes the ONNX backend test suites of the installed onnx package as test
folders (model.onnx + test_data_set_N/{input,output}_K.pb) for `kiln conformance`.

onnx's own `backend-test-tools generate-data` writes only the model cases
(simple, real) since the wheel stopped shipping data; the node cases are
collected here too and written by that same writer, so the files are exactly
what ONNX's runner reads. The pytorch-converted and pytorch-operator suites
still ship as data in the wheel and are copied.

  python tools/onnx_suite.py OUT_DIR
"""
import argparse
import os
import shutil
import sys

import onnx
import onnx.backend.test.case.model as model_cases
import onnx.backend.test.case.node as node_cases
import onnx.backend.test.cmd_tools as cmd_tools


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write node/, simple/, pytorch-*/ into")
    args = parser.parse_args()
    tmp = args.out + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)

    # generate_data() asks the model module for its cases: hand it node cases too.
    only_models = model_cases.collect_testcases
    cmd_tools.model_test.collect_testcases = lambda: only_models() + node_cases.collect_testcases()
    cmd_tools.generate_data(argparse.Namespace(output=tmp))
    # "real" cases only name models to download (kiln's real models live in tests/models).
    shutil.rmtree(os.path.join(tmp, "real"), ignore_errors=True)

    shipped = os.path.join(os.path.dirname(cmd_tools.__file__), "data")
    for suite in ("pytorch-converted", "pytorch-operator"):
        src = os.path.join(shipped, suite)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(tmp, suite))
    with open(os.path.join(tmp, "ONNX_VERSION"), "w") as f:
        f.write(onnx.__version__ + "\n")

    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)
    counts = {s: len(os.listdir(os.path.join(args.out, s)))
              for s in sorted(os.listdir(args.out)) if os.path.isdir(os.path.join(args.out, s))}
    print(f"onnx {onnx.__version__} test suites in {args.out}: "
          + ", ".join(f"{s} {n}" for s, n in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
