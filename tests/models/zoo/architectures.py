"""The zoo's architectures: each entry builds a small PyTorch model with random
weights (torchvision or transformers configs, nothing downloaded) and says how
its inputs are drawn. Used only by export_zoo.py, at development time.

An entry returns Spec(module, in_names, out_names, inputs, calib), where
inputs maps each input name to (shape, dtype, draw) and draw is one of
prepare_models.py's input specs: ("normal",), ("ints", high), ("mask", k),
("zeros",), ("uniform", low, high). calib, when set, draws a training batch
for BatchNorm calibration.

Sizes are reduced so that every model runs on the CPU simulator in seconds:
images 32x32 (64x64 where an architecture needs more), sequences of 16 tokens, hidden
size 64, two layers, a vocabulary of 1000.
"""
import collections

import torch
from torch import nn

# dynamic: the exporter's dynamic_axes ({input or output: {axis: name}}), for
# models that run at several shapes (a KV-cache decoder); None: static.
# profile: for the dynamic tier (architectures_dynamic_axes.py), the shapes
# kiln compiles with and runs at; None elsewhere.
Spec = collections.namedtuple("Spec", "module in_names out_names inputs calib dynamic profile", defaults=(None, None))

IMG = 32
SEQ = 16
VOCAB = 1000


class Call(nn.Module):
    """Wraps a model so that export sees plain tensors in and out."""

    def __init__(self, inner, fn):
        super().__init__()
        self.inner = inner
        self.fn = fn

    def forward(self, *args):
        return self.fn(self.inner, *args)


def image(c=3, h=IMG, w=IMG):
    return {"input": ((1, c, h, w), "float32", ("normal",))}


def vision(make, size=IMG, out="logits"):
    def build():
        m = make()
        return Spec(m, ["input"], [out], image(h=size, w=size), lambda: torch.randn(8, 3, size, size))
    return build


def tv(name, **kw):
    import torchvision.models as tvm
    return lambda: getattr(tvm, name)(weights=None, **kw)


def resnext_small():
    from torchvision.models.resnet import ResNet, Bottleneck
    return ResNet(Bottleneck, [1, 1, 1, 1], groups=8, width_per_group=4, num_classes=100)


def densenet_small():
    from torchvision.models.densenet import DenseNet
    return DenseNet(growth_rate=12, block_config=(2, 2, 2), num_init_features=24, bn_size=2, num_classes=100)


def googlenet():
    from torchvision.models import GoogLeNet
    return GoogLeNet(num_classes=100, aux_logits=False, init_weights=True, transform_input=False)


def convnext_small():
    from torchvision.models.convnext import ConvNeXt, CNBlockConfig
    cfg = [CNBlockConfig(32, 64, 1), CNBlockConfig(64, 128, 1), CNBlockConfig(128, None, 1)]
    return ConvNeXt(cfg, stochastic_depth_prob=0.0, num_classes=100)


def regnet_small():
    from torchvision.models.regnet import RegNet, BlockParams
    p = BlockParams.from_init_params(depth=6, w_0=16, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    return RegNet(p, num_classes=100)


def efficientnet_b0():
    import torchvision.models as tvm
    return tvm.efficientnet_b0(weights=None, num_classes=100)


def vit_small():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
                             mlp_dim=128, num_classes=100)


def swin_small():
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                           stochastic_depth_prob=0.0, num_classes=100)


def sharpen_head(layer, factor=8.0):
    """Random init leaves some heads' logits so close that their softmax is
    nearly uniform (export_zoo.py refuses that): a larger init std fixes it."""
    with torch.no_grad():
        layer.weight.mul_(factor)


def maxvit_small():
    from torchvision.models.maxvit import MaxVit
    m = MaxVit(input_size=(IMG, IMG), stem_channels=16, partition_size=4, block_channels=[16, 32],
                  block_layers=[1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=100)
    sharpen_head(m.classifier[-1])
    return m


def r3d_small():
    from torchvision.models.video.resnet import VideoResNet, BasicBlock, Conv3DSimple, BasicStem
    return VideoResNet(BasicBlock, [Conv3DSimple] * 4, [1, 1, 1, 1], BasicStem, num_classes=50)


def r3d():
    m = r3d_small()
    return Spec(m, ["video"], ["logits"], {"video": ((1, 3, 4, 16, 16), "float32", ("normal",))},
                lambda: torch.randn(4, 3, 4, 16, 16))


def segmentation(make):
    def build():
        inner = make()
        m = Call(inner, lambda i, x: i(x)["out"])
        return Spec(m, ["input"], ["out"], image(), lambda: torch.randn(8, 3, IMG, IMG))
    return build


class YoloStyle(nn.Module):
    """A YOLOv5/v8-style detector in miniature: Conv-BN-SiLU, C3-like CSP
    blocks, SPPF (repeated max-pool), an FPN with nearest upsampling and
    concat, and a head that decodes boxes on a grid with sigmoid."""

    class ConvBnAct(nn.Sequential):
        def __init__(self, cin, cout, k=1, s=1):
            super().__init__(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())

    class CSP(nn.Module):
        def __init__(self, c):
            super().__init__()
            cv = YoloStyle.ConvBnAct
            self.a, self.b = cv(c, c // 2), cv(c, c // 2)
            self.m = nn.Sequential(cv(c // 2, c // 2, 1), cv(c // 2, c // 2, 3))
            self.out = cv(c, c)

        def forward(self, x):
            a = self.a(x)
            return self.out(torch.cat([a + self.m(a), self.b(x)], 1))

    def __init__(self, classes=8, anchors=3):
        super().__init__()
        cv = YoloStyle.ConvBnAct
        self.stem = nn.Sequential(cv(3, 16, 3, 2), cv(16, 32, 3, 2), YoloStyle.CSP(32))
        self.p4 = nn.Sequential(cv(32, 64, 3, 2), YoloStyle.CSP(64))
        self.p5 = nn.Sequential(cv(64, 64, 3, 2), YoloStyle.CSP(64))
        self.sppf_in, self.sppf_out = cv(64, 32), cv(128, 64)
        self.pool = nn.MaxPool2d(5, 1, 2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.fuse = YoloStyle.CSP(128)
        self.no = classes + 5
        self.anchors = anchors
        self.heads = nn.ModuleList([nn.Conv2d(128, anchors * self.no, 1), nn.Conv2d(64, anchors * self.no, 1)])

    def sppf(self, x):
        x = self.sppf_in(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.sppf_out(torch.cat([x, y1, y2, self.pool(y2)], 1))

    def decode(self, p, stride):
        b, _, h, w = p.shape
        p = p.view(b, self.anchors, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        gy, gx = torch.meshgrid(torch.arange(h, dtype=p.dtype), torch.arange(w, dtype=p.dtype), indexing="ij")
        grid = torch.stack((gx, gy), -1).view(1, 1, h, w, 2)
        xy = (p[..., :2] * 2 - 0.5 + grid) * stride
        wh = (p[..., 2:4] * 2) ** 2 * stride
        return torch.cat((xy, wh, p[..., 4:]), -1).view(b, -1, self.no)

    def forward(self, x):
        x = self.stem(x)
        p4 = self.p4(x)
        p5 = self.sppf(self.p5(p4))
        f4 = self.fuse(torch.cat([self.up(p5), p4], 1))
        return torch.cat([self.decode(self.heads[0](f4), 16), self.decode(self.heads[1](p5), 32)], 1)


def yolo():  # 64x64: a 4x4 and a 2x2 grid
    return Spec(YoloStyle(), ["images"], ["detections"], {"images": ((1, 3, 64, 64), "float32", ("normal",))},
                lambda: torch.randn(8, 3, 64, 64))


class FlowWarp(nn.Module):
    """A PWC-Net/RAFT-style optical-flow step: features of both frames, a flow
    estimate, the second frame's features warped by it with grid_sample
    (bilinear, and nearest for an occlusion mask), a refined flow."""

    def __init__(self):
        super().__init__()
        self.feat = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 1, 1), nn.ReLU())
        self.flow0 = nn.Sequential(nn.Conv2d(64, 32, 3, 1, 1), nn.ReLU(), nn.Conv2d(32, 2, 3, 1, 1))
        self.refine = nn.Sequential(nn.Conv2d(64 + 2 + 1, 32, 3, 1, 1), nn.ReLU(), nn.Conv2d(32, 2, 3, 1, 1))

    def warp(self, x, flow, mode):
        b, _, h, w = x.shape
        gy, gx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
        base = torch.stack((gx, gy), -1).unsqueeze(0)
        grid = base + flow.permute(0, 2, 3, 1)
        return nn.functional.grid_sample(x, grid, mode=mode, padding_mode="zeros", align_corners=False)

    def forward(self, frame0, frame1):
        f0, f1 = self.feat(frame0), self.feat(frame1)
        flow = torch.tanh(self.flow0(torch.cat([f0, f1], 1))) * 0.2
        warped = self.warp(f1, flow, "bilinear")
        valid = self.warp(torch.ones_like(f1[:, :1]), flow, "nearest")
        return flow + self.refine(torch.cat([f0, warped, flow, valid], 1))


def flow():
    s = (1, 3, 32, 32)
    return Spec(FlowWarp(), ["frame0", "frame1"], ["flow"],
                {"frame0": (s, "float32", ("normal",)), "frame1": (s, "float32", ("normal",))}, None)


def raft_small():
    import torchvision.models.optical_flow as of
    inner = of.raft_small(weights=None)
    m = Call(inner, lambda i, a, b: i(a, b, num_flow_updates=2)[-1])
    s = (1, 3, 64, 64)
    return Spec(m, ["image1", "image2"], ["flow"],
                {"image1": (s, "float32", ("normal",)), "image2": (s, "float32", ("normal",))},
                lambda: None)


# --- transformers ----------------------------------------------------------

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=VOCAB,
            max_position_embeddings=128)


def hf(cls_name, config_name, **kw):
    import transformers
    cfg = getattr(transformers, config_name)(**kw)
    cfg._attn_implementation = "eager"
    return getattr(transformers, cls_name)(cfg)


def text_inputs(types=False):
    d = {"input_ids": ((1, SEQ), "int64", ("ints", VOCAB)), "attention_mask": ((1, SEQ), "int64", ("mask", 4))}
    if types:
        d["token_type_ids"] = ((1, SEQ), "int64", ("zeros",))
    return d


def encoder(cls_name, config_name, types=True, pooled=True, **kw):
    def build():
        inner = hf(cls_name, config_name, **{**TINY, **kw})

        def fn(i, ids, mask, *rest):
            extra = {"token_type_ids": rest[0]} if rest else {}
            o = i(input_ids=ids, attention_mask=mask, return_dict=True, **extra)
            return (o.last_hidden_state, o.pooler_output) if pooled else o.last_hidden_state

        ins = text_inputs(types)
        outs = ["last_hidden_state", "pooler_output"] if pooled else ["last_hidden_state"]
        return Spec(Call(inner, fn), list(ins), outs, ins, None)
    return build


def decoder(cls_name, config_name, **kw):
    def build():
        inner = hf(cls_name, config_name, **{**TINY, "use_cache": False, **kw})

        def fn(i, ids):
            mask = torch.ones_like(ids)
            pos = torch.arange(ids.shape[1]).unsqueeze(0)
            return i(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).logits

        ins = {"input_ids": ((1, SEQ), "int64", ("ints", VOCAB))}
        return Spec(Call(inner, fn), ["input_ids"], ["logits"], ins, None)
    return build


def seq2seq(cls_name, config_name, **kw):
    def build():
        inner = hf(cls_name, config_name, **kw)

        def fn(i, ids, mask, dec):
            return i(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, use_cache=False).logits

        ins = {**text_inputs(), "decoder_input_ids": ((1, 8), "int64", ("ints", VOCAB))}
        return Spec(Call(inner, fn), list(ins), ["logits"], ins, None)
    return build


def t5():
    return seq2seq("T5ForConditionalGeneration", "T5Config", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128,
                   num_layers=2, num_decoder_layers=2, num_heads=4, decoder_start_token_id=0)()


def bart():
    return seq2seq("BartForConditionalGeneration", "BartConfig", vocab_size=VOCAB, d_model=64, encoder_layers=2,
                   decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                   decoder_ffn_dim=128, max_position_embeddings=64)()


def whisper():
    inner = hf("WhisperForConditionalGeneration", "WhisperConfig", vocab_size=VOCAB, d_model=64, encoder_layers=2,
               decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
               decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=32, max_target_positions=32,
               decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2, suppress_tokens=[],
               begin_suppress_tokens=[])

    def fn(i, feats, dec):
        # Explicit mask and positions: without them transformers looks for
        # packed sequences with torch.diff, which has no ONNX form.
        mask = torch.ones_like(dec)
        pos = torch.arange(dec.shape[1]).unsqueeze(0)
        return i(input_features=feats, decoder_input_ids=dec, decoder_attention_mask=mask,
                 decoder_position_ids=pos, use_cache=False).logits

    ins = {"input_features": ((1, 16, 64), "float32", ("normal",)),
           "decoder_input_ids": ((1, 8), "int64", ("ints", VOCAB))}
    return Spec(Call(inner, fn), list(ins), ["logits"], ins, None)


def wav2vec2():
    inner = hf("Wav2Vec2Model", "Wav2Vec2Config", **{**TINY, "conv_dim": (32, 32, 32), "conv_stride": (5, 2, 2),
                                                     "conv_kernel": (10, 3, 3), "num_conv_pos_embeddings": 16,
                                                     "num_conv_pos_embedding_groups": 4, "do_stable_layer_norm": True,
                                                     "feat_extract_norm": "layer"})
    m = Call(inner, lambda i, x: i(input_values=x).last_hidden_state)
    ins = {"input_values": ((1, 1600), "float32", ("normal",))}
    return Spec(m, ["input_values"], ["last_hidden_state"], ins, None)


def clip():
    import transformers
    text = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=SEQ)
    vis = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=32,
               patch_size=8)
    cfg = transformers.CLIPConfig(text_config=text, vision_config=vis, projection_dim=32)
    cfg._attn_implementation = "eager"
    inner = transformers.CLIPModel(cfg)

    def fn(i, ids, mask, pixels):
        o = i(input_ids=ids, attention_mask=mask, pixel_values=pixels, return_dict=True)
        return o.logits_per_image, o.text_embeds, o.image_embeds

    ins = {**text_inputs(), "pixel_values": ((2, 3, 32, 32), "float32", ("normal",))}
    ins["input_ids"] = ((2, SEQ), "int64", ("ints", VOCAB))
    ins["attention_mask"] = ((2, SEQ), "int64", ("mask", 4))
    return Spec(Call(inner, fn), list(ins), ["logits_per_image", "text_embeds", "image_embeds"], ins, None)


def unit_batchnorm_scales(m):
    """transformers draws BatchNorm scales from N(0, initializer_range=0.02)
    (MobileViT): with the statistics calibrated, every conv-BN block then
    shrinks the signal about 50x and the logits no longer depend on the
    image (export_zoo.py refuses them). Trained networks keep scales near 1."""
    with torch.no_grad():
        for b in m.modules():
            if isinstance(b, nn.modules.batchnorm._BatchNorm):
                b.weight.fill_(1.0)
    return m


def hf_vision(cls_name, config_name, out, size=32, calib=False, head=None, prepare=None, **kw):
    def build():
        inner = hf(cls_name, config_name, **kw)
        if prepare:
            prepare(inner)
        if head:
            sharpen_head(head(inner))

        def fn(i, x):
            o = i(pixel_values=x, return_dict=True)
            return getattr(o, out)

        c = (lambda: torch.randn(8, 3, size, size)) if calib else None
        return Spec(Call(inner, fn), ["pixel_values"], [out], {"pixel_values": ((1, 3, size, size), "float32",
                                                                              ("normal",))}, c)
    return build


def detr():
    import transformers
    backbone = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                         layer_type="basic", out_features=["stage4"])
    # init_std 0.1 instead of 0.02: the decoder starts from zero queries and
    # sees the image only through cross-attention's value and output
    # projections; at 0.02 each shrinks the signal ~6x and the boxes no longer
    # depend on the image (docs/models.md).
    cfg = transformers.DetrConfig(use_timm_backbone=False, use_pretrained_backbone=False, backbone_config=backbone,
                                  backbone=None, d_model=64, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                  decoder_ffn_dim=128, num_queries=10, num_labels=8, init_std=0.1)
    cfg._attn_implementation = "eager"
    inner = transformers.DetrForObjectDetection(cfg)

    def fn(i, x, mask):
        o = i(pixel_values=x, pixel_mask=mask, return_dict=True)
        return o.logits, o.pred_boxes

    ins = {"pixel_values": ((1, 3, 64, 64), "float32", ("normal",)),  # a 2x2 feature map
           "pixel_mask": ((1, 64, 64), "int64", ("ones",))}
    return Spec(Call(inner, fn), list(ins), ["logits", "pred_boxes"], ins, lambda: None)


class SdpaRmsNormBlock(nn.Module):
    """A pre-norm decoder block written with the torch ops that the dynamo
    exporter maps to ONNX's opset 23 ops: torch.nn.RMSNorm (RMSNormalization)
    and F.scaled_dot_product_attention, causal, with grouped key/value heads
    (Attention); then a SwiGLU MLP. Hidden size 64, 4 query heads, 2 key/value
    heads."""

    def __init__(self, d=64, heads=4, kv_heads=2, ff=128):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.norm1 = nn.RMSNorm(d, eps=1e-6)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.norm2 = nn.RMSNorm(d, eps=1e-6)
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)
        with torch.no_grad():  # norm weights other than ones, so that they matter
            for norm in (self.norm1, self.norm2):
                norm.weight.copy_(1 + 0.2 * torch.randn(d))

    def forward(self, x):
        b, s, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.heads, self.hd).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def sdpa_rmsnorm_block():
    ins = {"hidden": ((1, SEQ, 64), "float32", ("normal",))}
    return Spec(SdpaRmsNormBlock(), ["hidden"], ["out"], ins, None)


def table():
    import torchvision.models as tvm
    import architectures_dynamic
    import architectures_more
    llama_like = dict(num_key_value_heads=2)
    return {
        # CNNs
        "resnet18": vision(lambda: tvm.resnet18(weights=None, num_classes=100)),
        "resnext_small": vision(resnext_small),
        "densenet_small": vision(densenet_small),
        "googlenet": vision(googlenet),
        "mobilenet_v3_small": vision(lambda: tvm.mobilenet_v3_small(weights=None, num_classes=100)),
        "mobilenet_v3_large": vision(lambda: tvm.mobilenet_v3_large(weights=None, num_classes=100)),
        "efficientnet_b0": vision(efficientnet_b0),
        "regnet_small": vision(regnet_small),
        "convnext_small": vision(convnext_small),
        "shufflenet_v2": vision(lambda: tvm.shufflenet_v2_x0_5(weights=None, num_classes=100)),
        "squeezenet": vision(lambda: tvm.squeezenet1_1(weights=None, num_classes=100)),
        "mnasnet": vision(lambda: tvm.mnasnet0_5(weights=None, num_classes=100)),
        # vision transformers
        "vit_small": vision(vit_small, size=32),
        "deit_small": hf_vision("DeiTForImageClassificationWithTeacher", "DeiTConfig", "logits", **{
            **TINY, "image_size": 32, "patch_size": 8, "num_labels": 10}),
        "swin_small": vision(swin_small, size=32),
        "maxvit_small": vision(maxvit_small),
        "mobilevit_small": hf_vision("MobileViTForImageClassification", "MobileViTConfig", "logits", size=64,
                                     calib=True, image_size=64, hidden_sizes=[32, 48, 64],
                                     neck_hidden_sizes=[8, 16, 24, 24, 32, 40, 80], num_labels=10,
                                     prepare=unit_batchnorm_scales, head=lambda m: m.classifier),
        "segformer_small": hf_vision("SegformerForSemanticSegmentation", "SegformerConfig", "logits", size=32,
                                     calib=True, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                                     hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2],
                                     num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=32,
                                     num_labels=5, head=lambda m: m.decode_head.classifier),
        # detection / segmentation
        "detr_small": detr,
        "lraspp_mobilenet_v3": segmentation(lambda: tvm.segmentation.lraspp_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=5)),
        "deeplabv3_mobilenet_v3": segmentation(lambda: tvm.segmentation.deeplabv3_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=5, aux_loss=False)),
        "yolo_style": yolo,
        "ssd_tiny": architectures_dynamic.ssd_tiny,
        # FCN-style segmentation with a dynamic batch, height and width
        "fcn_tiny_dynamic": architectures_dynamic.fcn_tiny_dynamic,
        # torchvision's SSDlite with its post-processing (score threshold, top-k, batched NMS)
        "ssdlite_mobilenet_v3": architectures_dynamic.ssdlite_mobilenet_v3,
        # a KV-cache decoder, one model at two shapes: a prefill (8 tokens, no
        # past) and a decode step (1 token after 8)
        "llama_kv_prefill": architectures_dynamic.kv_decoder(seq=8, past=0),
        "llama_kv_decode": architectures_dynamic.kv_decoder(seq=1, past=8),
        # video, optical flow
        "r3d_small": r3d,
        "flow_warp": flow,
        # encoder text models
        "bert_tiny": encoder("BertModel", "BertConfig"),
        "albert_tiny": encoder("AlbertModel", "AlbertConfig", embedding_size=32, num_hidden_layers=3),
        "deberta_v2_tiny": encoder("DebertaV2Model", "DebertaV2Config", types=False, pooled=False, relative_attention=True,
                                   position_buckets=8, max_relative_positions=32, pos_att_type=["p2c", "c2p"]),
        "electra_tiny": encoder("ElectraModel", "ElectraConfig", pooled=False, embedding_size=32),
        "roberta_tiny": encoder("RobertaModel", "RobertaConfig", types=False, pad_token_id=1),
        "distilbert_tiny": encoder("DistilBertModel", "DistilBertConfig", types=False, pooled=False, dim=64,
                                   hidden_dim=128, n_layers=2, n_heads=4),
        # encoder-decoders, audio, CLIP
        "t5_tiny": t5,
        "bart_tiny": bart,
        "whisper_tiny": whisper,
        "wav2vec2_tiny": wav2vec2,
        "clip_tiny": clip,
        # decoder LMs
        "llama_gqa": decoder("LlamaForCausalLM", "LlamaConfig", **llama_like),
        "mistral_tiny": decoder("MistralForCausalLM", "MistralConfig", sliding_window=8, **llama_like),
        "phi_tiny": decoder("PhiForCausalLM", "PhiConfig", partial_rotary_factor=0.5),
        "falcon_tiny": decoder("FalconForCausalLM", "FalconConfig", hidden_size=64, num_attention_heads=4,
                               new_decoder_architecture=False, multi_query=True, alibi=False, parallel_attn=True),
        "gpt_neox_tiny": decoder("GPTNeoXForCausalLM", "GPTNeoXConfig", rotary_pct=0.5),
        "qwen2_tiny": decoder("Qwen2ForCausalLM", "Qwen2Config", **llama_like),
        "gpt2_tiny": decoder("GPT2LMHeadModel", "GPT2Config", n_embd=64, n_layer=2, n_head=4, n_positions=128),
        "gemma_tiny": decoder("GemmaForCausalLM", "GemmaConfig", head_dim=16, **llama_like),
        "opt_tiny": decoder("OPTForCausalLM", "OPTConfig", ffn_dim=128, word_embed_proj_dim=64),
        # opset 23's transformer ops, exported only by the dynamo exporter (DYNAMO23 in export_zoo.py)
        "sdpa_rmsnorm_block": sdpa_rmsnorm_block,
        # the second batch: recurrent, audio, U-Net, YOLOv8, DINOv2, ConvNeXt-V2, Swin V2, MoE, Mamba
        **architectures_more.table(),
    }
