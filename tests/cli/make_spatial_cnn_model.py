"""A small segmentation-style CNN exported with a dynamic batch, height and
width (issue 19, symbolic spatial dims): Conv, BatchNormalization, Relu,
MaxPool, a strided Conv, InstanceNormalization, Resize (nearest, scale 2),
ConvTranspose, AveragePool, GroupNormalization, GlobalAveragePool and a Gemm
head. seg_cnn.onnx outputs the head's logits `y` and the per-pixel map
`seg`; seg_cnn_head.onnx the logits only (the fp16 check). Inputs
x_<shape>.npy at four shapes, one with odd sizes (floor divisions of the
strided windows). seg_resize_like.onnx resizes a strided branch to the
input's height and width with sizes computed from Shape ops (torchvision's
segmentation heads). seg_resize15.onnx resizes by non-integer scales
(nearest by 1.5, linear by 0.75, cubic by 1.5 x 1.25, cubic with
exclude_outside by 0.5 x 2.5: sizes floor(in * scale) over derived
symbols); seg_resize15_pooled.onnx resizes a 2x2 max pool's output by 1.5
(floor(1.5 * floor(height / 2)) is refused by name).

    python make_spatial_cnn_model.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

out = sys.argv[1]
rng = np.random.default_rng(19)
inits = []


def w(name, shape, scale=0.2, offset=0.0):
    inits.append(nh.from_array((rng.standard_normal(shape) * scale + offset).astype(np.float32), name))
    return name


C = 8
w("sc", (4,))
inits[-1] = nh.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
nodes = [
    h.make_node("Conv", ["x", w("w1", (C, 3, 3, 3)), w("b1", (C,))], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
    h.make_node("BatchNormalization", ["c1", w("s", (C,), 0.1, 1), w("bb", (C,)), w("m", (C,)),
                                       w("v", (C,), 0.1, 1)], ["n1"]),
    h.make_node("Relu", ["n1"], ["r1"]),
    h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
    h.make_node("Conv", ["p1", w("w2", (C, C, 3, 3)), w("b2", (C,))], ["c2"], pads=[1, 1, 1, 1], kernel_shape=[3, 3],
                strides=[2, 2]),
    h.make_node("Relu", ["c2"], ["r2"]),
    h.make_node("InstanceNormalization", ["r2", w("is", (C,), 0.1, 1), w("ib", (C,))], ["i2"]),
    h.make_node("Resize", ["i2", "", "sc"], ["u2"], mode="nearest"),
    h.make_node("ConvTranspose", ["u2", w("wt", (C, 4, 2, 2)), w("bt", (4,))], ["t3"], strides=[2, 2]),
    h.make_node("AveragePool", ["t3"], ["a3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    h.make_node("GroupNormalization", ["a3", w("gs", (4,), 0.1, 1), w("gb", (4,))], ["seg"], num_groups=2),
    h.make_node("GlobalAveragePool", ["seg"], ["gp"]),
    h.make_node("Flatten", ["gp"], ["f"]),
    h.make_node("Gemm", ["f", w("fw", (4, 5)), w("fb", (5,))], ["y"]),
]
x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, "height", "width"])
y = h.make_tensor_value_info("y", T.FLOAT, ["batch", 5])
seg = h.make_tensor_value_info("seg", T.FLOAT, ["batch", 4, "h_out", "w_out"])


def save(name, outputs, node_list=nodes):
    m = h.make_model(h.make_graph(node_list, "seg_cnn", [x], outputs, inits), opset_imports=[h.make_opsetid("", 21)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, name))


save("seg_cnn.onnx", [y, seg])
save("seg_cnn_head.onnx", [y])
for name, v in [("sc15", [1, 1, 1.5, 1.5]), ("sc075", [1, 1, 0.75, 0.75]), ("sc_cubic", [1, 1, 1.5, 1.25]),
                ("sc_cubic_ex", [1, 1, 0.5, 2.5])]:
    inits.append(nh.from_array(np.array(v, np.float32), name))
save("seg_resize15.onnx", [h.make_tensor_value_info(n, T.FLOAT, ["batch", 3, "h_" + n, "w_" + n])
                           for n in ["up15", "down075", "cubic", "cubic_ex"]],
     [h.make_node("Resize", ["x", "", "sc15"], ["up15"], mode="nearest"),
      h.make_node("Resize", ["x", "", "sc075"], ["down075"], mode="linear"),
      h.make_node("Resize", ["x", "", "sc_cubic"], ["cubic"], mode="cubic"),
      h.make_node("Resize", ["x", "", "sc_cubic_ex"], ["cubic_ex"], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1,
                  coordinate_transformation_mode="asymmetric")])
save("seg_resize15_pooled.onnx", [h.make_tensor_value_info("u", T.FLOAT, ["batch", 3, "hu", "wu"])],
     [h.make_node("MaxPool", ["x"], ["xp"], kernel_shape=[2, 2], strides=[2, 2]),
      h.make_node("Resize", ["xp", "", "sc15"], ["u"], mode="nearest")])
# As torchvision's segmentation heads: a strided branch resized (linear,
# half_pixel) back to the input's own height and width, its sizes computed
# from Shape ops, then added to a 1x1 conv of the input.
shape_nodes = [
    h.make_node("Conv", ["x", "w1", "b1"], ["lo"], pads=[1, 1, 1, 1], kernel_shape=[3, 3], strides=[2, 2]),
    h.make_node("Shape", ["lo"], ["lo_shape"]),
    h.make_node("Shape", ["x"], ["x_shape"]),
    h.make_node("Slice", ["lo_shape", "i0", "i2"], ["nc"]),
    h.make_node("Slice", ["x_shape", "i2", "i4"], ["hw"]),
    h.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
    h.make_node("Resize", ["lo", "", "", "sizes"], ["up"], mode="linear", coordinate_transformation_mode="half_pixel"),
    h.make_node("Conv", ["x", w("w1x1", (C, 3, 1, 1))], ["side"], kernel_shape=[1, 1]),
    h.make_node("Add", ["up", "side"], ["like"]),
]
for name, v in [("i0", 0), ("i2", 2), ("i4", 4)]:
    inits.append(nh.from_array(np.array([v], np.int64), name))
save("seg_resize_like.onnx", [h.make_tensor_value_info("like", T.FLOAT, ["batch", C, "height", "width"])], shape_nodes)
# A dim_param that spells a derived size ("height.div2"): refused by name.
bad = h.make_model(h.make_graph([h.make_node("Relu", ["x"], ["r"])], "bad",
                                [h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, "height.div2", 8])],
                                [h.make_tensor_value_info("r", T.FLOAT, ["batch", 3, "height.div2", 8])]),
                   opset_imports=[h.make_opsetid("", 21)])
onnx.save(bad, os.path.join(out, "seg_badname.onnx"))
for shape in [(1, 3, 32, 32), (2, 3, 48, 40), (3, 3, 64, 64), (2, 3, 37, 29)]:
    np.save(os.path.join(out, "x_%s.npy" % "x".join(map(str, shape))), rng.standard_normal(shape).astype(np.float32))
