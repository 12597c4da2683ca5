#!/usr/bin/env python3
"""Exports kiln's real-model test set from PyTorch, once, at development time.

ResNet-50, MobileNetV2, ViT-B/16 (torchvision) and BERT-base, GPT-2 small
(transformers, built from their configs: random weights, nothing downloaded)
go through torch.onnx.export (the TorchScript exporter, opset 17, static
shapes, batch 1, sequence 128, no constant folding: Conv and
BatchNormalization stay separate, as in many deployed files).

Weights are made reproducible before export: every large floating-point
parameter is overwritten with seeded normals (seed = crc32 of its name, mean
and std of PyTorch's own init), so prepare_models.py can rebuild it bit for bit
from a small recipe. BatchNorm statistics are then calibrated on random
batches (random init leaves mean 0 / var 1 and activations vanish or explode:
MobileNetV2's logits came out near 1e-9, and a test on them could never fail).
The skeleton written to tests/models/<name>.skeleton.onnx has each large
weight's data replaced by its recipe; everything else is kept.

Run (needs torch, torchvision, transformers, onnx):
    python3 tests/models/export_models.py [names...]
If torch cannot find CUDA libraries on a machine without a GPU, point
LD_LIBRARY_PATH at the CUDA toolkit's lib64: the export itself runs on the CPU.
"""
import itertools
import json
import os
import sys
import zlib

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ = 128
# Tensors of at most this many elements (biases, norm scales, BN statistics,
# shapes) and all integer ones keep their data in the skeleton.
KEEP_ELEMENTS = 4096


def seeded_normal(shape, mean, std, seed):
    """The one generator both scripts use (prepare_models.py has the twin)."""
    return (np.random.default_rng(seed).standard_normal(shape) * std + mean).astype(np.float32)


def make_reproducible(m):
    """Overwrites large float parameters with seeded normals; returns
    {bytes of the tensor: recipe}. Zero-initialised biases get small seeded
    values too: trained models have none that are exactly zero, and a zero
    bias lets `x + 0` vanish, which would flatter kernel counts."""
    recipes = {}
    for name, p in m.named_parameters():
        if p.dtype.is_floating_point and name.endswith("bias") and not bool(p.any()):
            with torch.no_grad():
                p.copy_(torch.from_numpy(seeded_normal(tuple(p.shape), 0.0, 0.02, zlib.crc32(name.encode()))))
    for name, p in itertools.chain(m.named_parameters(), m.named_buffers()):
        if not p.dtype.is_floating_point or p.numel() <= KEEP_ELEMENTS:
            continue
        mean, std = float(p.float().mean()), float(p.float().std())
        if std == 0:  # zero-initialised heads (ViT's classifier) would output zeros
            mean, std = 0.0, 0.02
        seed = zlib.crc32(name.encode())
        arr = seeded_normal(tuple(p.shape), mean, std, seed)
        with torch.no_grad():
            p.copy_(torch.from_numpy(arr))
        recipes[arr.tobytes()] = {"normal": [mean, std], "seed": seed}
    return recipes


def calibrate_batchnorm(m, make_input):
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
        recipes = make_reproducible(m)
        calibrate_batchnorm(m, lambda: torch.randn(8, 3, 224, 224))
        return m, recipes, (torch.randn(1, 3, 224, 224),), ["input"], ["logits"]
    return make


def bert():
    from transformers import BertConfig, BertModel
    inner = BertModel(BertConfig()).eval()

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            o = self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                           use_cache=False, return_dict=True)
            return o.last_hidden_state, o.pooler_output

    m = Bert().eval()
    recipes = make_reproducible(m)
    ids = torch.randint(0, 30522, (1, SEQ))
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    types = torch.zeros(1, SEQ, dtype=torch.int64)
    return (m, recipes, (ids, mask, types), ["input_ids", "attention_mask", "token_type_ids"],
            ["last_hidden_state", "pooler_output"])


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    inner = GPT2LMHeadModel(GPT2Config(use_cache=False, attn_implementation="eager")).eval()

    class LogitsOnly(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids):
            # Explicit mask and positions: without them transformers looks for
            # packed sequences with torch.diff, which has no ONNX form.
            mask = torch.ones_like(input_ids)
            pos = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
            return self.inner(input_ids=input_ids, attention_mask=mask, position_ids=pos, use_cache=False).logits

    m = LogitsOnly().eval()
    recipes = make_reproducible(m)
    return m, recipes, (torch.randint(0, 50257, (1, SEQ)),), ["input_ids"], ["logits"]


def models():
    import torchvision.models as tvm
    return {
        "resnet50": vision(tvm.resnet50),
        "mobilenet_v2": vision(tvm.mobilenet_v2),
        "vit_b_16": vision(tvm.vit_b_16),
        "bert_base": bert,
        "gpt2": gpt2,
    }


def strip(model, recipes):
    stripped = 0
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind != "f" or arr.size <= KEEP_ELEMENTS:
            continue
        r = recipes.get(arr.astype(np.float32).tobytes())
        if r is None:
            raise SystemExit(f"initializer {init.name} {arr.shape} is not a seeded parameter; "
                             "it would have to be committed whole")
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
        m, recipes, args, in_names, out_names = table[name]()
        path = os.path.join(HERE, f"{name}.skeleton.onnx")
        tmp = path + ".full.onnx"
        with torch.no_grad():
            torch.onnx.export(m, args, tmp, opset_version=17, dynamo=False, input_names=in_names,
                              output_names=out_names, do_constant_folding=False)
        model = onnx.load(tmp)
        os.remove(tmp)
        n = strip(model, recipes)
        model.doc_string = (f"kiln test model {name}: exported by tests/models/export_models.py "
                            f"(torch {torch.__version__})")
        onnx.save(model, path)
        print(f"{name}: {len(model.graph.node)} nodes, {n} weights stripped, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
