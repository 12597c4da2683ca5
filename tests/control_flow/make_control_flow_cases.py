"""Writes the control-flow cases (issue 17 item 5) as ONNX test folders
(model.onnx + test_data_set_N/{input,output}_K.pb, outputs from ONNX Runtime)
into tests/control_flow/cases/. Every condition below depends on the input
data, so kiln cannot fold it away; each case has data sets that take
different paths:
  if_data_cond     If on sum(x) > 0: the then branch reads an outer weight and
                   an outer value (implicit capture), the else branch has an
                   initializer of its own; data sets take each branch.
  loop_data_cond   a while loop (trip count 32, condition max|x| < limit) that
                   doubles x until it passes a limit read from the input: 1,
                   3 and 6 iterations in the three data sets, and an
                   iteration counter carried out.
  loop_nested_if   a Loop with a constant trip count, an If in its body on
                   the iteration number's parity and the data, and a scan
                   output stacking every iteration's value.
  scan_reverse     Scan (opset 16) over axis 1 of its input, backwards, with
                   two states and the scan output on axis 1.
Run from the repository root with the project's venv:
    .venv/bin/python tests/control_flow/make_control_flow_cases.py tests/control_flow/cases
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(17)
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def write_case(root, name, graph, feeds_list, opset=17):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="kiln-tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for s, feeds in enumerate(feeds_list):
        sd = os.path.join(d, f"test_data_set_{s}")
        os.makedirs(sd, exist_ok=True)
        results = sess.run(None, feeds)
        for i, vi in enumerate(graph.input):
            t = numpy_helper.from_array(feeds[vi.name], vi.name)
            open(os.path.join(sd, f"input_{i}.pb"), "wb").write(t.SerializeToString())
        for i, (vo, r) in enumerate(zip(graph.output, results)):
            t = numpy_helper.from_array(np.asarray(r), vo.name)
            open(os.path.join(sd, f"output_{i}.pb"), "wb").write(t.SerializeToString())
        print(name, s, [np.asarray(r).ravel()[:4] for r in results])


def const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.array(value, dtype), name)


def if_data_cond(root):
    x = helper.make_tensor_value_info("x", F, [2, 3])
    y = helper.make_tensor_value_info("y", F, [2, 3])
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t_relu"], name="then_relu"),
         helper.make_node("Mul", ["t_relu", "w"], ["t_scaled"], name="then_mul"),
         helper.make_node("Add", ["t_scaled", "x_shift"], ["t_out"], name="then_add")],
        "then", [], [helper.make_tensor_value_info("t_out", F, [2, 3])])
    else_g = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["e_sig"], name="else_sigmoid"),
         helper.make_node("Sub", ["e_sig", "e_bias"], ["e_out"], name="else_sub")],
        "else", [], [helper.make_tensor_value_info("e_out", F, [2, 3])], initializer=[const("e_bias", 0.75)])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["cond"], name="positive"),
        helper.make_node("Add", ["x", "x"], ["x_shift"], name="outer_value"),
        helper.make_node("If", ["cond"], ["y"], name="if_positive", then_branch=then_g, else_branch=else_g),
    ]
    w = numpy_helper.from_array((rng.standard_normal([2, 3])).astype(np.float32), "w")
    graph = helper.make_graph(nodes, "if_data_cond", [x], [y], initializer=[w, const("zero", 0.0)])
    pos = np.abs(rng.standard_normal([2, 3])).astype(np.float32)
    neg = -np.abs(rng.standard_normal([2, 3])).astype(np.float32)
    write_case(root, "if_data_cond", graph, [{"x": pos}, {"x": neg}])


def loop_data_cond(root):
    x = helper.make_tensor_value_info("x", F, [4])
    limit = helper.make_tensor_value_info("limit", F, [])
    y = helper.make_tensor_value_info("y", F, [4])
    count = helper.make_tensor_value_info("count", I64, [])
    body = helper.make_graph(
        [helper.make_node("Mul", ["v_in", "two"], ["v_out"], name="double"),
         helper.make_node("Add", ["n_in", "one"], ["n_out"], name="count_up"),
         helper.make_node("Abs", ["v_out"], ["v_abs"], name="abs"),
         helper.make_node("ReduceMax", ["v_abs"], ["v_max"], name="max", keepdims=0),
         helper.make_node("Less", ["v_max", "limit"], ["c_out"], name="below_limit")],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c_in", B, []),
         helper.make_tensor_value_info("v_in", F, [4]), helper.make_tensor_value_info("n_in", I64, [])],
        [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_value_info("v_out", F, [4]),
         helper.make_tensor_value_info("n_out", I64, [])],
        initializer=[const("two", 2.0), const("one", 1, np.int64)])
    nodes = [helper.make_node("Loop", ["trips", "start", "x", "n0"], ["y", "count"], name="while_small", body=body)]
    inits = [const("trips", 32, np.int64), const("start", True, np.bool_), const("n0", 0, np.int64)]
    graph = helper.make_graph(nodes, "loop_data_cond", [x, limit], [y, count], initializer=inits)
    base = np.array([0.5, -0.25, 0.125, 0.3], np.float32)
    feeds = [{"x": base, "limit": np.array(0.7, np.float32)},      # 1 iteration
             {"x": base, "limit": np.array(3.0, np.float32)},      # 3
             {"x": base, "limit": np.array(20.0, np.float32)}]     # 6
    write_case(root, "loop_data_cond", graph, feeds)


def loop_nested_if(root):
    x = helper.make_tensor_value_info("x", F, [3])
    y = helper.make_tensor_value_info("y", F, [3])
    ys = helper.make_tensor_value_info("ys", F, [5, 3])
    even_g = helper.make_graph([helper.make_node("Mul", ["acc_in", "x"], ["even_out"], name="even_mul")], "even", [],
                               [helper.make_tensor_value_info("even_out", F, [3])])
    odd_g = helper.make_graph([helper.make_node("Sub", ["acc_in", "x"], ["odd_out"], name="odd_sub")], "odd", [],
                              [helper.make_tensor_value_info("odd_out", F, [3])])
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two_i"], ["parity"], name="parity"),
         helper.make_node("Equal", ["parity", "zero_i"], ["is_even"], name="is_even"),
         helper.make_node("ReduceSum", ["acc_in"], ["acc_sum"], name="acc_sum", keepdims=0),
         helper.make_node("Less", ["acc_sum", "ten"], ["small"], name="small"),
         helper.make_node("And", ["is_even", "small"], ["take_even"], name="take_even"),
         helper.make_node("If", ["take_even"], ["acc_out"], name="branch", then_branch=even_g, else_branch=odd_g),
         helper.make_node("Identity", ["c_in"], ["c_out"], name="keep_going"),
         helper.make_node("Tanh", ["acc_out"], ["elem"], name="elem")],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c_in", B, []),
         helper.make_tensor_value_info("acc_in", F, [3])],
        [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_value_info("acc_out", F, [3]),
         helper.make_tensor_value_info("elem", F, [3])],
        initializer=[const("two_i", 2, np.int64), const("zero_i", 0, np.int64), const("ten", 10.0)])
    nodes = [helper.make_node("Loop", ["trips", "", "x"], ["y", "ys"], name="loop5", body=body)]
    graph = helper.make_graph(nodes, "loop_nested_if", [x], [y, ys], initializer=[const("trips", 5, np.int64)])
    feeds = [{"x": np.array([1.5, -0.5, 2.0], np.float32)}, {"x": np.array([3.0, 4.0, 5.0], np.float32)}]
    write_case(root, "loop_nested_if", graph, feeds)


def scan_reverse(root):
    x = helper.make_tensor_value_info("x", F, [2, 5])
    s0 = helper.make_tensor_value_info("s0", F, [2])
    p0 = helper.make_tensor_value_info("p0", F, [2])
    s = helper.make_tensor_value_info("s", F, [2])
    p = helper.make_tensor_value_info("p", F, [2])
    ys = helper.make_tensor_value_info("ys", F, [2, 5])
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"], name="running_sum"),
         helper.make_node("Mul", ["p_in", "x_t"], ["p_prod"], name="running_product"),
         helper.make_node("Add", ["p_prod", "bias"], ["p_out"], name="plus_bias"),
         helper.make_node("Sub", ["s_out", "p_out"], ["y_t"], name="difference")],
        "body",
        [helper.make_tensor_value_info("s_in", F, [2]), helper.make_tensor_value_info("p_in", F, [2]),
         helper.make_tensor_value_info("x_t", F, [2])],
        [helper.make_tensor_value_info("s_out", F, [2]), helper.make_tensor_value_info("p_out", F, [2]),
         helper.make_tensor_value_info("y_t", F, [2])])
    nodes = [helper.make_node("Scan", ["s0", "p0", "x"], ["s", "p", "ys"], name="scan_back", body=body,
                              num_scan_inputs=1, scan_input_axes=[1], scan_input_directions=[1],
                              scan_output_axes=[1])]
    graph = helper.make_graph(nodes, "scan_reverse", [s0, p0, x], [s, p, ys], initializer=[const("bias", 0.25)])
    feeds = [{"s0": np.zeros(2, np.float32), "p0": np.ones(2, np.float32),
              "x": rng.standard_normal([2, 5]).astype(np.float32)}]
    write_case(root, "scan_reverse", graph, feeds, opset=16)


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "cases")
    if_data_cond(root)
    loop_data_cond(root)
    loop_nested_if(root)
    scan_reverse(root)
