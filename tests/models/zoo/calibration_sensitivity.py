#!/usr/bin/env python3
"""Does a better BatchNorm calibration make a zoo CNN less sensitive to
rounding? Development time only (the export venv of docs/models.md: torch,
torchvision). For one architecture of architectures.py, built and made
reproducible as export_zoo.py does, it prints for several calibrations
(N batches of B random images, or export_zoo.py's own; optionally depthwise
kernels re-drawn with He init per group; optionally variances floored):
- the BatchNorm running variances (min, how many below 1e-4);
- the FP32 model's logits (std) and how far they move when only the input
  is rounded to f16 / bf16 (the floor under any 16-bit engine's error,
  input_rounding.py's figure) and for another random input (a model whose
  logits barely move between inputs is degenerate, however insensitive);
- with --stages, how a relative input perturbation of 1e-4 grows through
  the model's top-level stages.
Usage: calibration_sensitivity.py [--arch mnasnet] [--stages] [CONFIG...]
  CONFIG: export (export_zoo.py's calibration), cN_B, dw+cN_B, floor+export
"""
import argparse
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import architectures  # noqa: E402
import export_zoo  # noqa: E402


def depthwise_he(m):
    """Depthwise kernels drawn as He init counts their fan (k*k), not k*k*channels."""
    for mod in m.modules():
        if isinstance(mod, torch.nn.Conv2d) and mod.groups > 1 and mod.groups == mod.in_channels:
            with torch.no_grad():
                mod.weight.normal_(0, math.sqrt(2.0 / (mod.kernel_size[0] * mod.kernel_size[1])))


def build(arch, config):
    torch.manual_seed(0)
    spec = architectures.table()[arch]()
    m = spec.module.eval()
    if "dw+" in config:
        depthwise_he(m)
    export_zoo.make_reproducible(m)
    base = config.split("+")[-1]
    if base == "export":
        export_zoo.calibrate(m, spec.calib)
    else:
        n, b = map(int, base[1:].split("_"))
        shape = spec.inputs[spec.in_names[0]][0][1:]
        bns = [x for x in m.modules() if isinstance(x, torch.nn.modules.batchnorm._BatchNorm)]
        for x in bns:
            x.reset_running_stats()
            x.momentum = None
        m.train()
        with torch.no_grad():
            for _ in range(n):
                m(torch.randn(b, *shape))
        m.eval()
    if config.startswith("floor+"):
        for x in m.modules():
            if isinstance(x, torch.nn.modules.batchnorm._BatchNorm):
                x.running_var.clamp_(min=1e-2)
    return spec, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="mnasnet")
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("configs", nargs="*", default=["export", "c4_64", "c16_256", "dw+export", "floor+export"])
    a = ap.parse_args()
    for config in a.configs:
        spec, m = build(a.arch, config)
        shape = spec.inputs[spec.in_names[0]][0][1:]
        x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(7))
        other = torch.randn(4, *shape, generator=torch.Generator().manual_seed(8))
        v = torch.cat([b.running_var for b in m.modules() if isinstance(b, torch.nn.modules.batchnorm._BatchNorm)])
        with torch.no_grad():
            y = m(x)
            f16 = float((m(x.half().float()) - y).abs().max())
            bf16 = float((m(x.bfloat16().float()) - y).abs().max())
            moved = float((m(other) - y).abs().max())
        print(f"{a.arch} {config}: BN variance min {float(v.min()):.3g}, {int((v < 1e-4).sum())} of {v.numel()} "
              f"below 1e-4; logits std {float(y.std()):.3g}; input rounded to f16 moves them {f16:.3g}, to bf16 "
              f"{bf16:.3g}; another input {moved:.3g}", flush=True)
        if a.stages and hasattr(m, "layers"):
            noise = 1e-4 * x.abs().mean() * torch.randn(x.shape, generator=torch.Generator().manual_seed(9))
            h, hn, prev = x, x + noise, 1e-4
            with torch.no_grad():
                for i, layer in enumerate(m.layers):
                    h, hn = layer(h), layer(hn)
                    rel = float((h - hn).norm() / h.norm())
                    print(f"  layers.{i} {type(layer).__name__} {tuple(h.shape)}: relative change {rel:.3g} "
                          f"(x{rel / prev:.2f})")
                    prev = rel


if __name__ == "__main__":
    main()
