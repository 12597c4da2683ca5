"""Writes ONNX backend-test folders (model.onnx + test_data_set_N/{input,output}_K.pb)
whose data sets have different shapes, for conformance_one_plan_test.sh
(issue 19: `kiln conformance` runs them all from one plan):
  dynamic/cnn_batch            make_dynamic_models.py's CNN (dim_param batch),
                               sets at batch 1, 3 and 5
  dynamic/encoder_batch_seq    its BERT-style encoder (batch and seq), sets at
                               1x5, 2x16 and 4x9
  dynamic/cnn_same_shape       the CNN again, every set at batch 2: nothing to
                               span, so it runs set by set as a static folder
  dynamic/positive_batch       x [batch,3] -> its positive entries, doubled
                               (Greater, NonZero, Gather): a size the data
                               decides, sets at batch 1, 2 and 4
The expected outputs are ONNX Runtime's (CPU provider).
    python tests/cli/make_dynamic_conformance.py DIR
"""
import os
import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import make_dynamic_models as dyn  # same folder: the script's own path

rng = np.random.default_rng(1919)


def write_folder(dir_, build_model, feeds):
    os.makedirs(dir_, exist_ok=True)
    model = os.path.join(dir_, "model.onnx")
    build_model(model)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    for n, feed in enumerate(feeds):
        set_dir = os.path.join(dir_, f"test_data_set_{n}")
        os.makedirs(set_dir, exist_ok=True)
        for k, (name, value) in enumerate(feed.items()):
            with open(os.path.join(set_dir, f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(value, name).SerializeToString())
        for k, (name, value) in enumerate(zip(names, sess.run(names, feed))):
            with open(os.path.join(set_dir, f"output_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(value, name).SerializeToString())


def positive(path):
    n = helper.make_node
    nodes = [n("Greater", ["x", "zero"], ["pos"]), n("Reshape", ["x", "flat"], ["xf"]),
             n("Reshape", ["pos", "flat"], ["pf"]), n("NonZero", ["pf"], ["nz"]), n("Reshape", ["nz", "flat"], ["idx"]),
             n("Gather", ["xf", "idx"], ["v"]), n("Mul", ["v", "two"], ["y"])]
    inits = [numpy_helper.from_array(np.zeros((), np.float32), "zero"),
             numpy_helper.from_array(np.full((), 2, np.float32), "two"), dyn.i64("flat", [-1])]
    dyn.save(helper.make_graph(nodes, "positive", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])], initializer=inits), path)


def cnn_feed(batch):
    return {"x": rng.standard_normal((batch, 3, 16, 16)).astype(np.float32)}


def encoder_feed(batch, seq):
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[0, seq // 2:] = 0
    return {"input_ids": rng.integers(0, 50, size=(batch, seq), dtype=np.int64), "attention_mask": mask}


if __name__ == "__main__":
    root = os.path.join(sys.argv[1], "dynamic")
    write_folder(os.path.join(root, "cnn_batch"), dyn.cnn, [cnn_feed(b) for b in (1, 3, 5)])
    write_folder(os.path.join(root, "encoder_batch_seq"), dyn.encoder,
                 [encoder_feed(b, s) for b, s in ((1, 5), (2, 16), (4, 9))])
    write_folder(os.path.join(root, "cnn_same_shape"), dyn.cnn, [cnn_feed(2) for _ in range(3)])
    write_folder(os.path.join(root, "positive_batch"), positive,
                 [{"x": rng.standard_normal((b, 3)).astype(np.float32)} for b in (1, 2, 4)])
