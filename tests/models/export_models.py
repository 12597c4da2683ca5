#!/usr/bin/env python3
"""Exports kiln's real-model test set from PyTorch, once, at development time.

ResNet-50, MobileNetV2, ViT-B/16 (torchvision) and BERT-base, GPT-2 small
(transformers, built from their configs: random weights, nothing downloaded)
go through torch.onnx.export (the TorchScript exporter, opset 17, static
shapes, batch 1, sequence 128), which is how most deployed ONNX files were
made. Then every large floating-point initializer is stripped of its data and
replaced by a recipe (seed + distribution fitted to the exported tensor), and
the result is written as tests/models/<name>.skeleton.onnx. prepare_models.py
rebuilds the weights from the recipes and computes expected outputs with ONNX
Runtime, so CI needs only numpy, onnx and onnxruntime, and the repo stays small.

Run (needs torch, torchvision, transformers, onnx):
    python3 tests/models/export_models.py [names...]
If torch cannot find CUDA libraries on a machine without a GPU, point
LD_LIBRARY_PATH at the CUDA toolkit's lib64: the export itself runs on the CPU.
"""
import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ = 128
# Initializers of at most this many elements (biases, norm scales, shapes)
# and all integer ones (indices, position ids) keep their data.
KEEP_ELEMENTS = 4096


def calibrate_batchnorm(m, make_input):
    """Random init leaves BatchNorm with mean 0 / var 1, and activations then
    vanish or explode through 50 layers (MobileNetV2's logits come out near
    1e-9: a test on them could never fail). A trained network's BN statistics
    normalise each layer; estimate them on random batches, as calibration
    would, so outputs are O(1)."""
    bns = [b for b in m.modules() if isinstance(b, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for b in bns:
        b.reset_running_stats()
        b.momentum = None  # cumulative average over the calibration batches
    m.train()
    with torch.no_grad():
        for _ in range(4):
            m(make_input())
    m.eval()


def vision(ctor):
    def make():
        m = ctor(weights=None).eval()
        calibrate_batchnorm(m, lambda: torch.randn(8, 3, 224, 224))
        return m, (torch.randn(1, 3, 224, 224),), ["input"], ["logits"]
    return make


def bert():
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    m = BertModel(BertConfig()).eval()
    ids = torch.randint(0, 30522, (1, SEQ))
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    types = torch.zeros(1, SEQ, dtype=torch.int64)
    return (m, (ids, mask, types), ["input_ids", "attention_mask", "token_type_ids"],
            ["last_hidden_state", "pooler_output"])


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(use_cache=False)
    m = GPT2LMHeadModel(cfg).eval()

    class LogitsOnly(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids):
            return self.inner(input_ids=input_ids, use_cache=False).logits

    ids = torch.randint(0, 50257, (1, SEQ))
    return LogitsOnly(m).eval(), (ids,), ["input_ids"], ["logits"]


def models():
    import torchvision.models as tvm
    return {
        "resnet50": vision(tvm.resnet50),
        "mobilenet_v2": vision(tvm.mobilenet_v2),
        "vit_b_16": vision(tvm.vit_b_16),
        "bert_base": bert,
        "gpt2": gpt2,
    }


def recipe(arr, seed):
    """How prepare_models.py rebuilds this tensor: a constant, or seeded
    normals fitted per row (output channel) to the exported values, so the
    per-channel scales that BatchNorm folding put into conv weights survive."""
    a = arr.astype(np.float64)
    lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        return {"const": lo}
    rows = a.reshape(a.shape[0], -1) if a.ndim >= 2 else a.reshape(1, -1)
    mean = [float(x) for x in np.float32(rows.mean(axis=1))]
    std = [float(x) for x in np.float32(rows.std(axis=1))]
    return {"normal_rows": [mean, std], "clip": [lo, hi], "seed": seed}


def strip(model):
    stripped = 0
    for i, init in enumerate(model.graph.initializer):
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind != "f" or arr.size <= KEEP_ELEMENTS:
            continue
        r = recipe(arr, seed=1000 + i)
        init.ClearField("raw_data")
        init.ClearField("float_data")
        init.doc_string = "kiln-recipe:" + json.dumps(r, sort_keys=True)
        stripped += arr.size
    return stripped


def main(names):
    # The fused multi-head-attention fast path has no ONNX form; exporters
    # see the plain MatMul/Softmax attention that real ViT exports contain.
    torch.backends.mha.set_fastpath_enabled(False)
    table = models()
    for name in names or table:
        torch.manual_seed(0)
        m, args, in_names, out_names = table[name]()
        path = os.path.join(HERE, f"{name}.skeleton.onnx")
        tmp = path + ".full.onnx"
        with torch.no_grad():
            torch.onnx.export(m, args, tmp, opset_version=17, dynamo=False, input_names=in_names,
                              output_names=out_names, do_constant_folding=True)
        model = onnx.load(tmp)
        os.remove(tmp)
        n = strip(model)
        model.doc_string = f"kiln test model {name}: exported by tests/models/export_models.py (torch {torch.__version__})"
        onnx.save(model, path)
        print(f"{name}: {len(model.graph.node)} nodes, {n} weights stripped, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
