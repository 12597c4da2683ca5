"""Robustness cases from using kiln as a stranger would (branch cli9): folders
where files belong, an empty file given to inspect, trtexec and shell habits
(`-o -`, a flag given twice, a dimension left out of --shapes). Each used to
be accepted silently, answered with a wrong reason (a folder "over 2 GiB"),
an internal error (exit 2), or a message without "error:".

add(mc) declares them with make_corpus.py's helpers (mc is that module).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper


def add(mc):
    relu = mc.relu_model()

    def save_relu(name, expect, commands, args=()):
        return mc.save(name, relu, expect, commands=commands, args=args)

    # --- folders where a file belongs ---------------------------------------
    d = mc.case("model_is_a_folder", "error", "model.onnx: is a folder, not an ONNX model",
                commands=("compile", "run", "dump-ir", "inspect"))
    os.makedirs(os.path.join(d, "model.onnx"))
    d = mc.case("plan_is_a_folder", "error", "model.plan: is a folder, not a plan file",
                commands=("run", "inspect", "doctor"), file="model.plan")
    os.makedirs(os.path.join(d, "model.plan"))
    d = save_relu("inputs_file_is_a_folder", "bad.npy: is a folder, not a .npy or TensorProto file", ("run",),
                  ["--inputs", "x:bad.npy"])
    os.makedirs(os.path.join(d, "bad.npy"))

    # --- an empty file given to inspect (compile already said so) ------------
    d = mc.case("empty_file_inspect", "error", "model.onnx: the file is empty, not an ONNX model",
                commands=("inspect",))
    open(os.path.join(d, "model.onnx"), "wb").close()

    # --- a model ONNX Runtime refuses ("Duplicate definition-site for (x)") --
    mc.save("graph_input_declared_twice",
            mc.model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [mc.vi("x", [2, 3]), mc.vi("x", [2, 3])],
                     [mc.vi("y", [2, 3])]),
            'model.onnx: graph input "x" is declared twice')

    # --- node names twice in one graph (branch defects10): onnx.checker lets it
    # pass, ONNX Runtime refuses it ("two nodes with same node name"); each
    # subgraph is a namespace of its own, and unnamed nodes are no names --
    first = helper.make_node("Relu", ["x"], ["a"], name="same")
    second = helper.make_node("Neg", ["a"], ["y"], name="same")
    mc.save("node_name_twice", mc.model([first, second], [mc.vi("x", [2, 3])], [mc.vi("y", [2, 3])]),
            'model.onnx: nodes 0 and 1 are both named "same" (Relu and Neg): ONNX requires node names to be unique',
            commands=("compile", "run", "dump-ir"))

    def if_model(then_names):
        def branch(name, op, names):
            nodes = [helper.make_node(op, ["x"], [name + "_a"], name=names[0]),
                     helper.make_node("Identity", [name + "_a"], [name + "_o"], name=names[1])]
            return helper.make_graph(nodes, name, [], [mc.vi(name + "_o", [2])])
        node = helper.make_node("If", ["c"], ["y"], name="n", then_branch=branch("then", "Relu", then_names),
                                else_branch=branch("else", "Neg", ("n", "")))
        return mc.model([node], [mc.vi("x", [2]), mc.vi("c", [], TensorProto.BOOL)], [mc.vi("y", [2])])

    mc.save("node_name_twice_in_subgraph", if_model(("n", "n")),
            "model.onnx: nodes 0 and 1 in the subgraph 'then_branch' of node \"n\" (If) are both named \"n\" "
            "(Relu and Identity)", commands=("compile", "run", "dump-ir"))
    # The main graph's "n" and each branch's "n" are in different graphs.
    d = mc.case("valid_node_names_per_graph", "valid", commands=("compile", "run", "conformance"))
    onnx.save(if_model(("n", "")), os.path.join(d, "model.onnx"))
    x = np.array([-1, 2], np.float32)
    mc.write_test_data(d, [("x", x), ("c", np.array(True))], [("y", np.maximum(x, 0))])
    d = mc.case("valid_unnamed_nodes", "valid", commands=("compile", "run", "conformance"))
    first.name, second.name = "", ""
    onnx.save(mc.model([first, second], [mc.vi("x", [2, 3])], [mc.vi("y", [2, 3])]), os.path.join(d, "model.onnx"))
    x = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
    mc.write_test_data(d, [("x", x)], [("y", -np.maximum(x, 0))])

    # --- a graph output listed twice: ONNX Runtime returns it twice, kiln's ref
    # and sim backends too (tests/cli/duplicate_outputs_test.sh); a plan binds
    # outputs by name and refuses it before compiling anything (branch defects10)
    twice = mc.model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [mc.vi("x", [2, 3])],
                     [mc.vi("y", [2, 3]), mc.vi("y", [2, 3])])
    said = 'model.onnx: graph output "y" is listed twice (outputs 0 and 1): a plan\'s outputs are bound by name'
    mc.save("graph_output_twice_in_a_plan", twice, said, commands=("compile",), args=["-o", "model.plan"])
    mc.save("graph_output_twice_saved_engine", twice, said, commands=("run",),
            args=["--target", "cpu", "--save-engine", "model.plan"])

    # --- flags as a shell or trtexec user types them ----------------------------
    save_relu("shapes_dimension_left_out", "--shapes: '' in 'x:2x3x' is not a dimension",
              ("compile", "run", "inspect", "dump-ir"), ["--shapes", "x:2x3x"])
    save_relu("shapes_input_given_twice", "--shapes: input \"x\" is given twice", ("compile", "run"),
              ["--shapes", "x:2x3", "--shapes", "x:4x3"])
    save_relu("plan_to_stdout_dash", " -: kiln writes files, not standard output", ("compile", "run"),
              ["-o", "-"])
    save_relu("json_to_stdout_dash", "--json -: kiln writes files, not standard output", ("compile",),
              ["--json", "-"])
    save_relu("batch_zero", "error: --batch: Value 0 not in range 1 to 2147483647", ("compile", "run"),
              ["--batch", "0"])
    save_relu("warmup_negative", "error: --warmup-ms: '-1' is not a number of milliseconds >= 0", ("bench",),
              ["--warmup-ms", "-1"])
    save_relu("precision_given_twice", "error: --precision is given 2 times; give it once", ("compile", "run"),
              ["--precision", "fp16", "--precision", "fp32"])
    # trtexec's --onnx=FILE names the model; kiln's positional then is a second model.
    save_relu("onnx_flag_and_positional", "error: the model is given 2 times (MODEL, --onnx, --loadEngine name",
              ("compile",), ["--onnx=other.onnx"])
    save_relu("print_ir_after_unknown_pass", "--print-ir-after: pass 'fuze' is not in the pipeline", ("compile",),
              ["--print-ir-after", "fuze"])

    # --- conformance runs that could not fail (0 passed of 0) -------------------
    mc.case("conformance_folder_without_tests", "error", "holds no test (no model.onnx in it or in its subfolders)",
            commands=("conformance",))
    d = save_relu("conformance_filter_matches_nothing", "--filter 'no_such_test' matches none of the 1 tests",
                  ("conformance",), ["--filter", "no_such_test"])
    x = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
    mc.write_test_data(d, [("x", x)], [("y", np.maximum(x, 0))])
