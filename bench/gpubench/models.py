"""The five models of issue 6: what they are, their inputs, and where their
ONNX files come from.

On the GPU machine they are built by tests/models/export_models.py's
constructors (random, seeded weights; BatchNorm calibrated so activations
neither vanish nor explode) and exported per batch size, because the
TorchScript exporter bakes the batch into Reshape shapes. In a dry run they
are the prepared test models under build/models (batch 1)."""
import importlib.util
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ = 128


class Spec:
    def __init__(self, name, kind, large_batch, fp16_tolerance):
        self.name = name
        self.kind = kind  # "cnn" | "transformer"
        self.large_batch = large_batch
        # docs/precision.md: the whole-model fp16 bound (atol, rtol) the
        # models_fp16_* tests hold kiln to on the reference backend.
        self.fp16_tolerance = fp16_tolerance


SPECS = {
    "resnet50": Spec("resnet50", "cnn", 64, (0.1, 0.04)),
    "mobilenet_v2": Spec("mobilenet_v2", "cnn", 64, (2e-2, 8e-3)),
    "vit_b_16": Spec("vit_b_16", "transformer", 32, (7.5e-3, 3e-3)),
    "bert_base": Spec("bert_base", "transformer", 32, (7.5e-3, 3e-3)),
    "gpt2": Spec("gpt2", "transformer", 32, (7.5e-3, 3e-3)),
}


def make_inputs(name, batch, seed=7):
    """Inputs as numpy arrays, drawn like prepare_models.py draws them."""
    rng = np.random.default_rng(seed)
    if SPECS[name].kind == "cnn" or name == "vit_b_16":
        return {"input": rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)}
    if name == "bert_base":
        mask = np.ones((batch, SEQ), np.int64)
        mask[:, SEQ - 16:] = 0  # padded tail: the mask path is exercised
        return {"input_ids": rng.integers(0, 30522, (batch, SEQ), dtype=np.int64), "attention_mask": mask,
                "token_type_ids": np.zeros((batch, SEQ), np.int64)}
    return {"input_ids": rng.integers(0, 50257, (batch, SEQ), dtype=np.int64)}


def prepared_model(name):
    """The test model folder's ONNX file (tools/prepare_models.sh makes it)."""
    path = os.path.join(os.environ.get("KILN_MODELS_DIR", os.path.join(ROOT, "build", "models")), name, "model.onnx")
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing: run tools/prepare_models.sh build/models first")
    return path


def _exporters():
    spec = importlib.util.spec_from_file_location("kiln_export_models",
                                                  os.path.join(ROOT, "tests", "models", "export_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_torch(name):
    """(module, input names, output names) with the test set's weights."""
    import torch
    torch.backends.mha.set_fastpath_enabled(False)
    torch.manual_seed(0)
    m, _, _, in_names, out_names = _exporters().models()[name]()
    return m.eval(), in_names, out_names


def export_onnx(module, in_names, out_names, inputs, path):
    import torch
    args = tuple(torch.from_numpy(inputs[n]) for n in in_names)
    with torch.no_grad():
        torch.onnx.export(module, args, path, opset_version=17, dynamo=False, input_names=in_names,
                          output_names=out_names, do_constant_folding=False)
    return path
