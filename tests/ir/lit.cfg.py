# lit configuration for kiln's IR tests: .kir files with RUN lines, checked
# with FileCheck (MLIR style; see docs/ir.md). Run through ctest (test
# "ir_lit"), or by hand:
#   python3 /usr/lib/llvm-14/build/utils/lit/lit.py -v tests/ir --param kiln_bin_dir=build/bin
import os
import tempfile

import lit.formats

config.name = "kiln-ir"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".kir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))

repo = os.path.dirname(os.path.dirname(config.test_source_root))
params = lit_config.params
bin_dir = params.get("kiln_bin_dir", os.path.join(repo, "build", "bin"))
config.test_exec_root = params.get("exec_root", os.path.join(tempfile.gettempdir(), "kiln-lit"))

kiln = os.path.join(os.path.abspath(bin_dir), "kiln")
filecheck = params.get("filecheck", "/usr/bin/FileCheck-14")
not_tool = params.get("not", "/usr/lib/llvm-14/bin/not")
for tool in (kiln, filecheck, not_tool):
    if not os.path.exists(tool):
        lit_config.fatal("kiln-ir: missing tool " + tool)

# Whole words only, so paths and CHECK text are left alone.
config.substitutions.append((r"\bFileCheck\b", filecheck))
config.substitutions.append((r"\bnot\b", not_tool))
config.substitutions.append((r"\bkiln\b", kiln))

# "codegen": this kiln was built with CUDA codegen, so `kiln opt` hands the
# fuser codegen's answer (docs/fusion.md); the sanitizer build has none and
# skips the tests that say `REQUIRES: codegen`.
if params.get("codegen", "0") == "1":
    config.available_features.add("codegen")
