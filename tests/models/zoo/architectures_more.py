"""More zoo architectures (architectures.py's table takes them in): the
families users bring that the first batch lacked -- recurrent sequence models,
1-D audio convolutions, a U-Net, a YOLOv8-style anchor-free head, RT-DETR
(deformable attention, top-k query selection), a ViT that
interpolates its position embeddings (DINOv2), ConvNeXt-V2's GRN, Swin V2,
EfficientNetV2's fused-MBConv, a Perceiver-style cross-attention encoder,
mixtures of experts (Mixtral, and a top-k block written to export) and a
selective-scan (Mamba) language model. Same rules as
architectures.py: random weights, nothing downloaded, sizes a CPU simulator
runs in seconds.
"""
import torch
from torch import nn

from architectures import SEQ, TINY, Call, Spec, decoder, hf, hf_vision, sharpen_head, vision


class RecurrentTagger(nn.Module):
    """A frame tagger as speech and sequence-labelling users write it: a
    two-layer bidirectional LSTM over feature frames, a bidirectional GRU on
    top, and a Linear head per frame (batch_first, as most code has it)."""

    def __init__(self, feats=20, hidden=32, classes=10):
        super().__init__()
        self.lstm = nn.LSTM(feats, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(2 * hidden, hidden, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, _ = self.gru(y)
        return self.head(y)


def lstm_gru_tagger():
    ins = {"features": ((1, SEQ, 20), "float32", ("normal",))}
    m = RecurrentTagger()
    sharpen_head(m.head, 4.0)
    return Spec(m, ["features"], ["logits"], ins, None)


class TemporalConvNet(nn.Module):
    """A TCN keyword spotter on a raw waveform: a strided Conv1d front end,
    residual blocks of causal dilated Conv1d (left padding only) with weight
    normalisation (computed in the graph, as torch's parametrization exports
    it), BatchNorm1d and GELU, then global average pooling and a Linear head."""

    class Block(nn.Module):
        def __init__(self, c, dilation):
            super().__init__()
            wn = nn.utils.parametrizations.weight_norm
            self.pad = 2 * dilation
            self.conv1 = wn(nn.Conv1d(c, c, 3, dilation=dilation))
            self.conv2 = wn(nn.Conv1d(c, c, 3, dilation=dilation))
            self.bn = nn.BatchNorm1d(c)
            self.act = nn.GELU()

        def forward(self, x):
            y = self.act(self.conv1(nn.functional.pad(x, (self.pad, 0))))
            y = self.bn(self.conv2(nn.functional.pad(y, (self.pad, 0))))
            return self.act(x + y)

    def __init__(self, c=32, classes=12):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(1, c, 16, stride=8, padding=4), nn.BatchNorm1d(c), nn.GELU())
        self.blocks = nn.Sequential(*[TemporalConvNet.Block(c, d) for d in (1, 2, 4, 8)])
        self.head = nn.Linear(c, classes)

    def forward(self, wave):
        return self.head(self.blocks(self.front(wave)).mean(-1))


def tcn_audio():
    n = 1024
    m = TemporalConvNet()
    sharpen_head(m.head, 4.0)
    return Spec(m, ["waveform"], ["logits"], {"waveform": ((1, 1, n), "float32", ("normal",))},
                lambda: torch.randn(8, 1, n))


class UNet(nn.Module):
    """The segmentation U-Net: double 3x3 conv-BN-ReLU stages, max-pool down,
    ConvTranspose2d up, the encoder's features concatenated as skips, a 1x1
    classifier per pixel."""

    @staticmethod
    def double(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    def __init__(self, classes=4, w=16):
        super().__init__()
        self.enc = nn.ModuleList([UNet.double(3, w), UNet.double(w, 2 * w), UNet.double(2 * w, 4 * w)])
        self.mid = UNet.double(4 * w, 8 * w)
        self.up = nn.ModuleList([nn.ConvTranspose2d(8 * w, 4 * w, 2, 2), nn.ConvTranspose2d(4 * w, 2 * w, 2, 2),
                                 nn.ConvTranspose2d(2 * w, w, 2, 2)])
        self.dec = nn.ModuleList([UNet.double(8 * w, 4 * w), UNet.double(4 * w, 2 * w), UNet.double(2 * w, w)])
        self.out = nn.Conv2d(w, classes, 1)

    def forward(self, x):
        skips = []
        for e in self.enc:
            x = e(x)
            skips.append(x)
            x = nn.functional.max_pool2d(x, 2)
        x = self.mid(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], 1))
        return self.out(x)


def unet_small():
    return Spec(UNet(), ["input"], ["out"], {"input": ((1, 3, 32, 32), "float32", ("normal",))},
                lambda: torch.randn(8, 3, 32, 32))


class YoloV8Style(nn.Module):
    """An Ultralytics YOLOv8-style detector in miniature: C2f blocks (split in
    two, a chain of bottlenecks, every intermediate concatenated), SPPF, a
    PAN neck, the decoupled anchor-free head and its decode -- distribution
    focal loss (a softmax over 16 bins, then the expectation by a fixed 1x1
    conv), distances to boxes around anchor points, sigmoid class scores."""

    class Conv(nn.Sequential):
        def __init__(self, cin, cout, k=1, s=1):
            super().__init__(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())

    class Bottleneck(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2 = YoloV8Style.Conv(c, c, 3), YoloV8Style.Conv(c, c, 3)

        def forward(self, x):
            return x + self.cv2(self.cv1(x))

    class C2f(nn.Module):
        def __init__(self, cin, cout, n=1):
            super().__init__()
            self.c = cout // 2
            self.cv1 = YoloV8Style.Conv(cin, 2 * self.c)
            self.cv2 = YoloV8Style.Conv((2 + n) * self.c, cout)
            self.m = nn.ModuleList(YoloV8Style.Bottleneck(self.c) for _ in range(n))

        def forward(self, x):
            y = list(self.cv1(x).chunk(2, 1))
            y.extend(m(y[-1]) for m in self.m)
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2 = YoloV8Style.Conv(c, c // 2), YoloV8Style.Conv(2 * c, c)
            self.pool = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.pool(x)
            y2 = self.pool(y1)
            return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))

    def __init__(self, classes=6, reg_max=16):
        super().__init__()
        cv, c2f = YoloV8Style.Conv, YoloV8Style.C2f
        self.reg_max, self.nc = reg_max, classes
        self.p3 = nn.Sequential(cv(3, 16, 3, 2), cv(16, 32, 3, 2), c2f(32, 32), cv(32, 32, 3, 2), c2f(32, 32))
        self.p4 = nn.Sequential(cv(32, 64, 3, 2), c2f(64, 64))
        self.p5 = nn.Sequential(cv(64, 64, 3, 2), c2f(64, 64), YoloV8Style.SPPF(64))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n4, self.n3 = c2f(128, 64), c2f(96, 32)
        self.box = nn.ModuleList(nn.Sequential(cv(c, 32, 3), nn.Conv2d(32, 4 * reg_max, 1)) for c in (32, 64, 64))
        self.cls = nn.ModuleList(nn.Sequential(cv(c, 32, 3), nn.Conv2d(32, classes, 1)) for c in (32, 64, 64))
        self.dfl = nn.Conv2d(reg_max, 1, 1, bias=False).requires_grad_(False)
        self.dfl.weight.data[:] = torch.arange(reg_max, dtype=torch.float32).view(1, reg_max, 1, 1)

    def forward(self, x):
        p3 = self.p3(x)
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        n4 = self.n4(torch.cat([self.up(p5), p4], 1))
        n3 = self.n3(torch.cat([self.up(n4), p3], 1))
        feats, anchors, strides = [], [], []
        for f, s, box, cls in zip((n3, n4, p5), (8, 16, 32), self.box, self.cls):
            b, _, h, w = f.shape
            feats.append(torch.cat([box(f), cls(f)], 1).view(b, 4 * self.reg_max + self.nc, -1))
            sy, sx = torch.meshgrid(torch.arange(h, dtype=f.dtype) + 0.5, torch.arange(w, dtype=f.dtype) + 0.5,
                                    indexing="ij")
            anchors.append(torch.stack((sx, sy), -1).view(-1, 2))
            strides.append(torch.full((h * w, 1), float(s)))
        y = torch.cat(feats, 2)
        a = torch.cat(anchors).transpose(0, 1).unsqueeze(0)
        stride = torch.cat(strides).transpose(0, 1)
        box, cls = y.split((4 * self.reg_max, self.nc), 1)
        b, _, n = box.shape
        dist = self.dfl(box.view(b, 4, self.reg_max, n).transpose(2, 1).softmax(1)).view(b, 4, n)
        lt, rb = dist.chunk(2, 1)
        x1y1, x2y2 = a - lt, a + rb
        boxes = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * stride
        return torch.cat((boxes, cls.sigmoid()), 1)


def yolov8_style():  # 64x64: 8x8, 4x4 and 2x2 grids, 84 anchors
    return Spec(YoloV8Style(), ["images"], ["detections"], {"images": ((1, 3, 64, 64), "float32", ("normal",))},
                lambda: torch.randn(8, 3, 64, 64))


def dinov2_small():
    """DINOv2 as a classifier, fed a 48x32 image although configured for
    32x32: its 4x4 grid of position embeddings is resized bicubically to 6x4
    in the graph, as every DINOv2 user at another resolution runs it."""
    def build():
        inner = hf("Dinov2ForImageClassification", "Dinov2Config", **{
            **TINY, "image_size": 32, "patch_size": 8, "num_labels": 10, "layerscale_value": 0.5})
        sharpen_head(inner.classifier)

        def fn(i, x):
            return i(pixel_values=x, return_dict=True).logits

        return Spec(Call(inner, fn), ["pixel_values"], ["logits"],
                    {"pixel_values": ((1, 3, 48, 32), "float32", ("normal",))}, None)
    return build


def unit_grn(m):
    """transformers starts ConvNeXt-V2's GRN gamma and beta at zero (the
    block is then an identity); trained ones are not: draw them so the
    global response normalisation changes the output."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if ".grn." in name:
                p.copy_(0.5 * torch.randn_like(p))
    return m


def efficientnetv2_small():
    """EfficientNetV2's stages in miniature (torchvision's generic class):
    fused-MBConv (a full 3x3 expansion conv instead of depthwise) in the
    early stages, MBConv with squeeze-excite later, stochastic depth off."""
    from torchvision.models.efficientnet import EfficientNet, FusedMBConvConfig, MBConvConfig
    setting = [FusedMBConvConfig(1, 3, 1, 16, 16, 1), FusedMBConvConfig(4, 3, 2, 16, 32, 2),
               MBConvConfig(4, 3, 2, 32, 48, 1), MBConvConfig(6, 3, 2, 48, 64, 1)]
    return EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0, num_classes=100, last_channel=256)


class PerceiverStyle(nn.Module):
    """A Perceiver-style encoder: a learned latent array cross-attends to a
    long input (nn.MultiheadAttention with kdim/vdim other than its width,
    batch_first), then latent self-attention blocks, a mean-pooled head."""

    def __init__(self, in_dim=24, d=64, latents=8, heads=4, blocks=2, classes=10):
        super().__init__()
        self.latents = nn.Parameter(0.5 * torch.randn(1, latents, d))
        self.cross_norm, self.in_norm = nn.LayerNorm(d), nn.LayerNorm(in_dim)
        self.cross = nn.MultiheadAttention(d, 1, kdim=in_dim, vdim=in_dim, batch_first=True)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True,
                                                               norm_first=True) for _ in range(blocks))
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        q = self.cross_norm(self.latents.expand(x.shape[0], -1, -1))
        kv = self.in_norm(x)
        z = self.latents + self.cross(q, kv, kv, need_weights=False)[0]
        for b in self.blocks:
            z = b(z)
        return self.head(z.mean(1))


def perceiver_style():
    m = PerceiverStyle()
    sharpen_head(m.head, 4.0)
    return Spec(m, ["inputs"], ["logits"], {"inputs": ((1, 64, 24), "float32", ("normal",))}, None)


class TopKMoE(nn.Module):
    """A mixture-of-experts block as written where a sparse dispatch will not
    export: a router, top-2 of 4 experts per token, every expert's SwiGLU MLP
    computed for all tokens as batched einsums over stacked weights, the
    chosen experts' outputs picked with gather and weighted by the softmax of
    their router logits (the routing weights also scattered back into a
    dense [tokens, experts] map, returned as the load); pre-norm, residual."""

    def __init__(self, d=64, experts=4, k=2, ff=96):
        super().__init__()
        self.k = k
        self.norm = nn.LayerNorm(d)
        self.router = nn.Linear(d, experts, bias=False)
        self.gate = nn.Parameter(torch.randn(experts, d, ff) * d ** -0.5)
        self.up = nn.Parameter(torch.randn(experts, d, ff) * d ** -0.5)
        self.down = nn.Parameter(torch.randn(experts, ff, d) * ff ** -0.5)
        with torch.no_grad():
            self.router.weight.mul_(4.0)  # decisive routing: no near-ties for rounding to flip

    def forward(self, x):
        h = self.norm(x)
        logits = self.router(h)
        top, idx = logits.topk(self.k, -1)
        w = top.softmax(-1)
        y = torch.einsum("bsef,efd->bsed", nn.functional.silu(torch.einsum("bsd,edf->bsef", h, self.gate)) *
                         torch.einsum("bsd,edf->bsef", h, self.up), self.down)
        picked = torch.gather(y, 2, idx.unsqueeze(-1).expand(-1, -1, -1, y.shape[-1]))
        load = torch.zeros_like(logits).scatter(-1, idx, w)
        return x + (picked * w.unsqueeze(-1)).sum(2), load


def moe_topk():
    ins = {"hidden": ((1, SEQ, 64), "float32", ("normal",))}
    return Spec(TopKMoE(), ["hidden"], ["out", "load"], ins, None)


def rtdetr_small():
    """transformers' RT-DETR in miniature (64x64, a ResNet backbone of basic
    blocks): a hybrid encoder (attention over the coarsest level, CCFM fusion
    with upsampling), top-k query selection from the encoder's scores, and
    a decoder of multi-scale deformable attention (grid_sample over three
    levels, two points each), with iterative box refinement."""
    import transformers
    backbone = transformers.RTDetrResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                               layer_type="basic", out_features=["stage2", "stage3", "stage4"])
    cfg = transformers.RTDetrConfig(backbone_config=backbone, encoder_hidden_dim=32, encoder_in_channels=[32, 64, 128],
                                    feat_strides=[8, 16, 32], encoder_ffn_dim=64, encoder_attention_heads=2,
                                    d_model=32, num_queries=20, decoder_ffn_dim=64, decoder_attention_heads=2,
                                    decoder_layers=2, num_labels=5, num_denoising=0, decoder_n_points=2,
                                    num_feature_levels=3, decoder_in_channels=[32, 32, 32], anchor_image_size=[64, 64])
    cfg._attn_implementation = "eager"
    inner = transformers.RTDetrForObjectDetection(cfg)

    def fn(i, x):
        o = i(pixel_values=x, return_dict=True)
        return o.logits, o.pred_boxes

    ins = {"pixel_values": ((1, 3, 64, 64), "float32", ("normal",))}
    return Spec(Call(inner, fn), ["pixel_values"], ["logits", "pred_boxes"], ins, lambda: torch.randn(8, 3, 64, 64))


def table():
    return {
        # sequence models: recurrent and 1-D convolutional
        "lstm_gru_tagger": lstm_gru_tagger,
        "tcn_audio": tcn_audio,
        # dense prediction and detection
        "unet_small": unet_small,
        "yolov8_style": yolov8_style,
        "rtdetr_small": rtdetr_small,
        # vision transformers and modern CNNs
        "dinov2_small": dinov2_small(),
        "convnextv2_small": hf_vision("ConvNextV2ForImageClassification", "ConvNextV2Config", "logits", size=32,
                                      num_channels=3, patch_size=2, hidden_sizes=[16, 32, 64, 128],
                                      depths=[1, 1, 1, 1], num_labels=10, prepare=unit_grn,
                                      head=lambda m: m.classifier),
        "swinv2_small": hf_vision("Swinv2ForImageClassification", "Swinv2Config", "logits", size=32,
                                  image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 4],
                                  window_size=4, num_labels=10, head=lambda m: m.classifier),
        "efficientnetv2_small": vision(efficientnetv2_small),
        "perceiver_style": perceiver_style,
        # language models: mixture of experts, selective state spaces
        "moe_topk": moe_topk,
        "mixtral_moe_tiny": decoder("MixtralForCausalLM", "MixtralConfig", num_key_value_heads=2,
                                    num_local_experts=4, num_experts_per_tok=2,
                                    experts_implementation="eager"),
        "mamba_tiny": decoder("MambaForCausalLM", "MambaConfig", hidden_size=64, state_size=8,
                              num_hidden_layers=2, expand=2, conv_kernel=4),
    }
