"""The dynamic zoo tier (docs/testing.md, docs/dynamic_shapes.md): zoo
architectures exported the way a user exports a model to serve at several
sizes, with a dynamic batch (vision) or a dynamic batch and sequence length
(text), by the TorchScript exporter and, for some, the dynamo exporter too.
Each variant records the profile kiln compiles it with once (min, opt, max
per input) and the three shapes the tier runs it at; the skeletons go into
tests/models/zoo/dynamic/ (export_zoo.py --dynamic), the run is
tests/models/zoo/run_zoo_dynamic.py.

The export example has batch 2, not 1: the dynamo exporter specialises a
dim whose example size is 1 (torch.export's 0/1 rule), and the TorchScript
exporter can bake a size of 1 into a Reshape; with 2 both keep it symbolic.
Used by export_zoo.py, at development time only (needs torch).
"""
import architectures

# (min, opt, max) of the symbols and the three run shapes.
VISION = {"batch": (1, 2, 4), "runs": [1, 3, 4]}
TEXT = {"batch": (1, 2, 4), "seq": (1, 16, 32), "runs": [(1, 7), (2, 16), (4, 32)]}

# name -> (zoo architecture, kind); <name>_dynamo is the dynamo exporter's twin.
VARIANTS = {
    "resnet18": "vision",
    "mobilenet_v3_small": "vision",
    "efficientnet_b0": "vision",
    "convnext_small": "vision",
    "vit_small": "vision",
    "yolo_style": "vision",
    "bert_tiny": "text",
    "distilbert_tiny": "text",
    "roberta_tiny": "text",
    "gpt2_tiny": "text",
    # the second batch (architectures_more.py): a U-Net at any batch; the
    # recurrent tagger over any batch and number of frames (LSTM and GRU
    # over a symbolic sequence)
    "unet_small": "vision",
    "lstm_gru_tagger": "frames",
}
DYNAMO = ["resnet18", "mobilenet_v3_small", "vit_small", "bert_tiny", "gpt2_tiny", "unet_small", "lstm_gru_tagger"]


def _with_axes(spec, kind):
    """The zoo Spec with example shapes at batch 2, the exporter's dynamic
    axes (every input and output: dim 0 batch, text dim 1 seq) and the
    profile (min/opt/max shapes per input, three run shapes)."""
    # frames: [batch, seq, features] in, like text's [batch, seq] otherwise.
    axes_of = {"vision": {0: "batch"}, "text": {0: "batch", 1: "seq"}, "frames": {0: "batch", 1: "seq"}}[kind]
    inputs, dynamic, prof = {}, {}, {"min": {}, "opt": {}, "max": {}, "runs": [{}, {}, {}]}
    for name, (shape, dtype, draw) in spec.inputs.items():
        shape = list(shape)
        if kind == "text":
            # Inputs like pixel values of CLIP are not in the tier: every input is [batch, seq].
            assert len(shape) == 2, (name, shape)
        rest = shape[len(axes_of):]
        example = [2, *shape[1:len(axes_of)]] + rest
        inputs[name] = (tuple(example), dtype, draw)
        dynamic[name] = dict(axes_of)
        if kind == "vision":
            lo, opt, hi = VISION["batch"]
            prof["min"][name], prof["opt"][name], prof["max"][name] = [lo] + rest, [opt] + rest, [hi] + rest
            for k, b in enumerate(VISION["runs"]):
                prof["runs"][k][name] = [b] + rest
        else:
            (blo, bopt, bhi), (slo, sopt, shi) = TEXT["batch"], TEXT["seq"]
            prof["min"][name], prof["opt"][name], prof["max"][name] = ([blo, slo] + rest, [bopt, sopt] + rest,
                                                                       [bhi, shi] + rest)
            for k, (b, s) in enumerate(TEXT["runs"]):
                prof["runs"][k][name] = [b, s] + rest
    for out in spec.out_names:
        # Pooled outputs ([batch, hidden]) have no sequence axis.
        dynamic[out] = {0: "batch"} if kind == "vision" or out == "pooler_output" else dict(axes_of)
    return spec._replace(inputs=inputs, dynamic=dynamic, profile=prof)


def table():
    base = architectures.table()
    out = {}
    for name, kind in VARIANTS.items():
        out[name] = (lambda n=name, k=kind: _with_axes(base[n](), k))
    return out
