"""Zoo architectures whose sizes change at run time (docs/dynamic_shapes.md):
an SSD-style detector whose detections NonMaxSuppression decides, a
Llama-style decoder with its KV cache as inputs and outputs, exported with
dynamic sequence and past lengths (a prefill and a decode step of one model),
and an FCN-style segmentation net exported with a dynamic batch, height and
width.
Used by architectures.table(), at development time only.
"""
import torch
from torch import nn

from architectures import Spec, sharpen_head


class OnnxNms(torch.autograd.Function):
    """ONNX NonMaxSuppression over every batch and class, exported as the op
    itself (torchvision exports its nms the same way, one class at a time);
    eager runs torchvision.ops.nms per (batch, class) on the boxes scoring
    above the threshold, as ONNX Runtime's kernel selects them."""

    @staticmethod
    def forward(ctx, boxes, scores, max_per_class, iou, score_threshold):
        import torchvision
        rows = []
        for b in range(scores.shape[0]):
            for c in range(scores.shape[1]):
                s = scores[b, c]
                idx = torch.nonzero(s > score_threshold).flatten()
                keep = torchvision.ops.nms(boxes[b, idx], s[idx], float(iou))[: int(max_per_class)]
                rows += [[b, c, int(i)] for i in idx[keep]]
        return torch.tensor(rows, dtype=torch.int64).reshape(-1, 3)

    @staticmethod
    def symbolic(g, boxes, scores, max_per_class, iou, score_threshold):
        return g.op("NonMaxSuppression", boxes, scores, max_per_class, iou, score_threshold)


class TinySsd(nn.Module):
    """An SSD-style single-shot detector in miniature, post-processing
    included: a strided conv body (64x64 -> an 8x8 grid), class and box
    heads with 3 anchors per cell (one square, two 2:1), SSD's box decoding
    (centre offsets / 10, log sizes / 5) to corners, softmax scores without
    the background class, then NonMaxSuppression over every class (IoU 0.3,
    score 0.35, up to 20 per class) and the kept boxes and scores gathered by
    its (batch, class, box) rows. The number of detections is decided by the
    data: kiln runs it with a size symbol (docs/dynamic_shapes.md)."""

    def __init__(self, classes=3, grid=8):
        super().__init__()
        self.classes = classes
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
                                  nn.Conv2d(32, 32, 3, 2, 1), nn.ReLU())
        self.cls = nn.Conv2d(32, 3 * classes, 3, 1, 1)
        self.box = nn.Conv2d(32, 3 * 4, 3, 1, 1)
        sharpen_head(self.cls, 4.0)  # class scores apart from uniform, so the threshold keeps some, not all
        cells = [((j + 0.5) / grid, (i + 0.5) / grid) for i in range(grid) for j in range(grid)]
        sizes = [(0.25, 0.25), (0.35, 0.18), (0.18, 0.35)]
        self.register_buffer("anchors", torch.tensor([[cx, cy, w, h] for cx, cy in cells for w, h in sizes]))

    def forward(self, images):
        f = self.body(images)
        n = f.shape[0]
        cls = self.cls(f).permute(0, 2, 3, 1).reshape(n, -1, self.classes)
        reg = self.box(f).permute(0, 2, 3, 1).reshape(n, -1, 4)
        a = self.anchors
        centre = a[:, :2] + reg[..., :2] / 10 * a[:, 2:]
        size = a[:, 2:] * torch.exp(reg[..., 2:] / 5)
        boxes = torch.cat([centre - size / 2, centre + size / 2], -1)
        scores = torch.softmax(cls, -1)[..., 1:].transpose(1, 2).contiguous()
        selected = OnnxNms.apply(boxes, scores, torch.tensor([20]), torch.tensor([0.3]), torch.tensor([0.35]))
        box_index = selected[:, 2]
        det_boxes = boxes[0][box_index]
        det_scores = scores.reshape(-1)[selected[:, 1] * a.shape[0] + box_index]
        return selected, boxes, scores, det_boxes, det_scores


def ssd_tiny():
    return Spec(TinySsd(), ["images"], ["selected", "boxes", "scores", "det_boxes", "det_scores"],
                {"images": ((1, 3, 64, 64), "float32", ("normal",))}, None)


class KvDecoder(nn.Module):
    """A Llama-style decoder at toy size, written out so that its KV cache is
    explicit: RMSNorm, rotary position embeddings (positions past_len ..
    past_len + seq - 1), grouped-query attention (4 query heads sharing 2
    key/value heads) with a causal mask over past + new positions, a SwiGLU
    MLP. Inputs: input_ids [1, seq] and per layer past_key_L / past_value_L
    [1, 2, past, 16]; outputs: logits [1, seq, vocab] and present_key_L /
    present_value_L [1, 2, past + seq, 16], the past with the new positions
    appended (what the next step takes as its past)."""

    VOCAB, DIM, HEADS, KV_HEADS, HEAD_DIM, FF, LAYERS = 256, 64, 4, 2, 16, 128, 2

    class RmsNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(1 + 0.2 * torch.randn(d))  # not ones, so that it matters

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            D, H, KV, HD, FF = (KvDecoder.DIM, KvDecoder.HEADS, KvDecoder.KV_HEADS, KvDecoder.HEAD_DIM, KvDecoder.FF)
            self.norm1, self.norm2 = KvDecoder.RmsNorm(D), KvDecoder.RmsNorm(D)
            self.q, self.k, self.v = nn.Linear(D, H * HD, bias=False), nn.Linear(D, KV * HD, bias=False), \
                nn.Linear(D, KV * HD, bias=False)
            self.o = nn.Linear(H * HD, D, bias=False)
            self.gate, self.up = nn.Linear(D, FF, bias=False), nn.Linear(D, FF, bias=False)
            self.down = nn.Linear(FF, D, bias=False)

        @staticmethod
        def rotate(x, cos, sin):
            half = x.shape[-1] // 2
            return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

        def forward(self, x, cos, sin, mask, past_k, past_v):
            b, s, _ = x.shape
            H, KV, HD = KvDecoder.HEADS, KvDecoder.KV_HEADS, KvDecoder.HEAD_DIM
            h = self.norm1(x)
            q = self.rotate(self.q(h).view(b, s, H, HD).transpose(1, 2), cos, sin)
            k = self.rotate(self.k(h).view(b, s, KV, HD).transpose(1, 2), cos, sin)
            v = self.v(h).view(b, s, KV, HD).transpose(1, 2)
            k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
            t = k.shape[2]
            kk = k[:, :, None].expand(b, KV, H // KV, t, HD).reshape(b, H, t, HD)
            vv = v[:, :, None].expand(b, KV, H // KV, t, HD).reshape(b, H, t, HD)
            att = torch.softmax(q @ kk.transpose(2, 3) / HD ** 0.5 + mask, -1)
            x = x + self.o((att @ vv).transpose(1, 2).reshape(b, s, H * HD))
            h = self.norm2(x)
            return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h)), k, v

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(self.VOCAB, self.DIM)
        self.layers = nn.ModuleList([KvDecoder.Layer() for _ in range(self.LAYERS)])
        self.norm = KvDecoder.RmsNorm(self.DIM)
        self.head = nn.Linear(self.DIM, self.VOCAB, bias=False)
        sharpen_head(self.head, 4.0)  # logits apart, so greedy choices are not near-ties
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, self.HEAD_DIM, 2).float() / self.HEAD_DIM))

    def forward(self, input_ids, *past):
        s, p = input_ids.shape[1], past[0].shape[2]
        pos = torch.arange(s) + p
        freqs = pos[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat([freqs, freqs], -1)
        cos, sin = emb.cos(), emb.sin()
        # Position i of the new tokens sees the past and new positions <= p + i.
        seen = torch.arange(p + s)[None, :] <= pos[:, None]
        mask = torch.where(seen, torch.zeros(()), torch.full((), torch.finfo(torch.float32).min))
        x = self.embed(input_ids)
        present = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, mask, past[2 * i], past[2 * i + 1])
            present += [k, v]
        return (self.head(self.norm(x)), *present)


def kv_decoder(seq, past):
    def build():
        L = KvDecoder.LAYERS
        past_names = [f"past_{kind}_{i}" for i in range(L) for kind in ("key", "value")]
        present_names = [n.replace("past_", "present_") for n in past_names]
        ins = {"input_ids": ((1, seq), "int64", ("ints", KvDecoder.VOCAB))}
        for n in past_names:
            ins[n] = ((1, KvDecoder.KV_HEADS, past, KvDecoder.HEAD_DIM), "float32", ("normal",))
        dynamic = {"input_ids": {1: "seq"}, "logits": {1: "seq"}}
        dynamic.update({n: {2: "past"} for n in past_names})
        dynamic.update({n: {2: "total"} for n in present_names})
        return Spec(KvDecoder(), list(ins), ["logits"] + present_names, ins, None, dynamic)
    return build


class SsdLite(nn.Module):
    """torchvision's SSDlite (MobileNetV3-Large backbone with the reduced
    tail, SSDLite's depthwise heads, 6 feature maps with 2:1 and 3:1 anchors)
    with its own pre- and post-processing exported: the normalising resize of
    GeneralizedRCNNTransform, box decoding, clipping to the image, per class
    a score threshold and top-k over the survivors (NonZero, TopK with a
    data-dependent k), then batched NMS (torchvision's coordinate-offset
    trick, one NonMaxSuppression) and the kept boxes, scores and labels.
    Reduced from the 320x320, 91-class original to SIZE x SIZE (522 anchors)
    and 4 classes (background included) so that the simulator runs it in
    seconds. The classification head is sharpened (2x) and the thresholds
    set so that every stage of the post-processing decides something on the
    CI input (seed 7): the 0.5 score threshold keeps 46, 59 and 35 anchors of
    the three classes, top-k cuts the second class to 50, NMS (IoU 0.55)
    suppresses 14 of the 131 and the cap of 100 detections drops 17.

    In training mode (BatchNorm calibration only) it runs backbone and head
    without the post-processing, which would need targets."""

    SIZE, CLASSES = 128, 4

    def __init__(self):
        super().__init__()
        from torchvision.models.detection import ssdlite320_mobilenet_v3_large
        from torchvision.models.detection.transform import GeneralizedRCNNTransform
        m = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=self.CLASSES,
                                          score_thresh=0.5, detections_per_img=100, topk_candidates=50)
        m.transform = GeneralizedRCNNTransform(self.SIZE, self.SIZE, [0.5] * 3, [0.5] * 3, size_divisible=1,
                                               fixed_size=(self.SIZE, self.SIZE))
        for block in m.head.classification_head.module_list:
            sharpen_head(block[1], 2.0)
        self.m = m

    def forward(self, images):
        if self.training:
            batch, _ = self.m.transform(list(images))
            return self.m.head(list(self.m.backbone(batch.tensors).values()))
        d = self.m(list(images))[0]
        return d["boxes"], d["scores"], d["labels"]


def ssdlite_mobilenet_v3():
    size = SsdLite.SIZE
    return Spec(SsdLite(), ["images"], ["boxes", "scores", "labels"],
                {"images": ((1, 3, size, size), "float32", ("normal",))}, lambda: torch.randn(8, 3, size, size))


class FcnTiny(nn.Module):
    """An FCN-style segmentation net in miniature, as torchvision's FCN and
    DeepLab heads are built: a strided Conv-BN-ReLU backbone (stride 8, odd
    sizes floored), a head with a dilated conv, GroupNorm and a global-pool
    branch (an image-level feature broadcast back), a 1x1 classifier, and a
    bilinear resize to the input's own height and width (sizes taken from the
    input's shape). Exported with a dynamic batch, height and width."""

    def __init__(self, classes=5):
        super().__init__()

        def block(cin, cout, stride):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

        self.body = nn.Sequential(block(3, 16, 2), block(16, 16, 1), nn.MaxPool2d(2, 2), block(16, 32, 2))
        self.head = nn.Sequential(nn.Conv2d(32, 32, 3, 1, 2, dilation=2), nn.GroupNorm(4, 32), nn.ReLU())
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(32, 32, 1), nn.Sigmoid())
        self.cls = nn.Conv2d(32, classes, 1)

    def forward(self, x):
        f = self.head(self.body(x))
        f = f * self.pool(f)
        y = self.cls(f)
        return nn.functional.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)


def fcn_tiny_dynamic():
    spec_in = {"input": ((1, 3, 64, 48), "float32", ("normal",))}
    dynamic = {"input": {0: "batch", 2: "height", 3: "width"}, "out": {0: "batch", 2: "height", 3: "width"}}
    return Spec(FcnTiny(), ["input"], ["out"], spec_in, lambda: torch.randn(8, 3, 64, 48), dynamic)
