"""The SSD300 yardstick: the detection training loop a careful engineer writes by hand, no harness around it.

SSD300 v1.1 as NVIDIA DeepLearningExamples (PyTorch/Detection/SSD) define it: torchvision's ResNet-50 v1.5
cut after layer3 (conv4_x) with layer3's stride set to 1, five extra blocks with BatchNorm, six heads, 8,732
default boxes, 81 classes: 22,894,902 parameters. One synthetic batch made once on the device: images, and
targets already encoded to offsets from the default boxes (IoU > 0.5 plus each object's best box, as DALI's
box_encoder does), so no input cost is timed. Training step: forward, DLE's vectorised multibox loss in FP32
(Smooth-L1 on positives + cross-entropy with 3:1 hard negative mining), backward, SGD with momentum (DLE:
lr 2.6e-3 per 32 images, weight decay 5e-4 except BatchNorm and biases). Inference is `model(images)` only,
as DLE times it. channels_last on CUDA. Prints images/s. Imports nothing from dlbench (see bare_common.py).

Usage: python yardsticks/bare_ssd300.py [--batch 64] [--precision amp|bf16|fp32|tf32] [--mode train|infer]
       [--warmup 20] [--steps 20] [--windows 8] [--optimizer fused|foreach] [--device auto|cuda|cpu]
       [--compile [--compile-mode default|reduce-overhead|max-autotune|max-autotune-no-cudagraphs]]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys

import bare_common as bc
import torch
import torchvision
from torch import nn

CLASSES = 81  # 80 COCO classes + background
EXTRA_OUT = [1024, 512, 512, 256, 256, 256]  # channels of the six feature maps
PER_CELL = [4, 6, 6, 6, 4, 4]  # default boxes per cell of each map (38², 19², 10², 5², 3², 1²: 8,732)


class SSD300(nn.Module):
    """DLE's SSD300: ResNet-50 v1.5 up to layer3 at stride 1, five extra blocks, six heads."""

    def __init__(self) -> None:
        super().__init__()
        resnet = torchvision.models.resnet50(weights=None)
        self.backbone = nn.Sequential(*list(resnet.children())[:7])  # stem .. layer3
        first = self.backbone[-1][0]
        first.conv1.stride = first.conv2.stride = first.downsample[0].stride = (1, 1)
        self.extra = nn.ModuleList(
            _extra_block(c_in, mid, c_out, last=i >= 3)
            for i, (c_in, c_out, mid) in enumerate(
                zip(EXTRA_OUT[:-1], EXTRA_OUT[1:], [256, 256, 128, 128, 128], strict=True)
            )
        )
        self.loc = nn.ModuleList(
            nn.Conv2d(c, n * 4, 3, padding=1) for n, c in zip(PER_CELL, EXTRA_OUT, strict=True)
        )
        self.conf = nn.ModuleList(
            nn.Conv2d(c, n * CLASSES, 3, padding=1) for n, c in zip(PER_CELL, EXTRA_OUT, strict=True)
        )
        for layer in [*self.extra, *self.loc, *self.conf]:
            for p in layer.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, 3, 300, 300) -> ploc (N, 4, 8732), plabel (N, 81, 8732)."""
        feats = [self.backbone(x)]
        for block in self.extra:
            feats.append(block(feats[-1]))
        n = x.shape[0]
        locs = [head(f).reshape(n, 4, -1) for head, f in zip(self.loc, feats, strict=True)]
        confs = [head(f).reshape(n, CLASSES, -1) for head, f in zip(self.conf, feats, strict=True)]
        return torch.cat(locs, 2).contiguous(), torch.cat(confs, 2).contiguous()


def _extra_block(c_in: int, mid: int, c_out: int, last: bool) -> nn.Sequential:
    """1x1 down to `mid`, then 3x3 stride 2 (the last two blocks: 3x3 without padding, stride 1)."""
    conv3 = nn.Conv2d(mid, c_out, 3, bias=False) if last else nn.Conv2d(mid, c_out, 3, 2, 1, bias=False)
    return nn.Sequential(
        nn.Conv2d(c_in, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
        conv3, nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
    )  # fmt: skip


def default_boxes() -> torch.Tensor:
    """DLE's dboxes300_coco(): (8732, 4) as cx, cy, w, h in [0, 1], in the order the heads emit them."""
    feat, steps = [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300]
    scales, ratios = [21, 45, 99, 153, 207, 261, 315], [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
    boxes = []
    for k, size in enumerate(feat):
        s1, s2 = scales[k] / 300, scales[k + 1] / 300
        sizes = [(s1, s1), (math.sqrt(s1 * s2),) * 2]
        for r in ratios[k]:
            w, h = s1 * math.sqrt(r), s1 / math.sqrt(r)
            sizes += [(w, h), (h, w)]
        fk = 300 / steps[k]
        for (w, h), (i, j) in itertools.product(sizes, itertools.product(range(size), repeat=2)):
            boxes.append(((j + 0.5) / fk, (i + 0.5) / fk, w, h))
    return torch.tensor(boxes).clamp_(0, 1)


def xywh_to_ltrb(b: torch.Tensor) -> torch.Tensor:
    return torch.cat([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], 1)


def encoded_targets(n: int, dboxes: torch.Tensor, max_objects: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Random objects per image, encoded to the default boxes as DLE's Encoder and DALI's box_encoder (with
    offsets) do: each default box takes its best object if IoU > 0.5, each object takes its best default
    box; unmatched boxes keep the default box (zero offsets) and label 0. Returns gloc (n, 4, 8732), the
    offsets ((cx, cy) - default) / default wh / 0.1 and log(wh / default wh) / 0.2, and glabel (n, 8732)."""
    d_ltrb = xywh_to_ltrb(dboxes)
    locs, labels = [], []
    for _ in range(n):
        k = int(torch.randint(1, max_objects + 1, ()))
        lt = torch.rand(k, 2, device=dboxes.device) * 0.7
        obj = torch.cat([lt, (lt + 0.05 + torch.rand(k, 2, device=dboxes.device) * 0.4).clamp(max=1)], 1)
        iou = torchvision.ops.box_iou(obj, d_ltrb)  # (k, 8732)
        best_iou, best_obj = iou.max(0)
        best_box = iou.argmax(1)
        best_iou[best_box] = 2.0
        best_obj[best_box] = torch.arange(k, device=dboxes.device)
        match = best_iou > 0.5
        label = torch.zeros(len(dboxes), dtype=torch.long, device=dboxes.device)
        label[match] = torch.randint(1, CLASSES, (k,), device=dboxes.device)[best_obj[match]]
        o, d = obj[best_obj[match]], dboxes[match]
        xy, wh = (o[:, :2] + o[:, 2:]) / 2, o[:, 2:] - o[:, :2]
        offsets = torch.zeros(len(dboxes), 4, device=dboxes.device)
        offsets[match] = torch.cat([(xy - d[:, :2]) / d[:, 2:] / 0.1, (wh / d[:, 2:]).log() / 0.2], 1)
        locs.append(offsets.t())
        labels.append(label)
    return torch.stack(locs), torch.stack(labels)


def multibox_loss(ploc, plabel, gloc, glabel) -> torch.Tensor:
    """DLE's ssd/model.py Loss on pre-encoded offsets: Smooth-L1 on the offsets of positive boxes +
    cross-entropy on positives and the 3x as many hardest negatives (ranked by loss with two sorts, no
    per-image loop), per image divided by its positives, batch mean."""
    mask = glabel > 0
    pos_num = mask.sum(1)
    sl1 = (nn.functional.smooth_l1_loss(ploc, gloc, reduction="none").sum(1) * mask).sum(1)
    con = nn.functional.cross_entropy(plabel, glabel, reduction="none")
    _, idx = con.detach().masked_fill(mask, 0).sort(1, descending=True)
    _, rank = idx.sort(1)
    neg_mask = rank < torch.clamp(3 * pos_num, max=mask.size(1)).unsqueeze(-1)
    closs = (con * (mask | neg_mask)).sum(1)
    return ((sl1 + closs) * (pos_num > 0) / pos_num.float().clamp(min=1e-6)).mean()


def sgd(model: nn.Module, a: argparse.Namespace, dev: torch.device) -> torch.optim.SGD:
    """DLE's optimizer: SGD momentum 0.9, lr scaled by batch/32, no weight decay on BatchNorm and biases."""
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.SGD(groups, lr=a.lr * a.batch / 32, momentum=0.9, **bc.optimizer_kwargs(a, dev))
    if a.optimizer == "fused":  # torch's fused SGD fills a missing buffer from inf grads on a skipped step
        for p in model.parameters():
            opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
    return opt


def main() -> int:
    p = bc.parser(__doc__, warmup=20, steps=20, windows=8)
    p.add_argument("--batch", type=int, default=None, help="images per step (default 64 on CUDA, 2 on CPU)")
    p.add_argument("--lr", type=float, default=2.6e-3, help="per 32 images (DLE)")
    p.add_argument("--weight-decay", type=float, default=5e-4)
    return bc.run_all(p, one_config)


def one_config(a: argparse.Namespace) -> int:
    """One configuration: build, warm up, time, print its BARE line."""
    prec = bc.setup(a)
    dev = prec.device
    a.batch = a.batch or (64 if dev.type == "cuda" else 2)
    fmt = torch.channels_last if dev.type == "cuda" else torch.contiguous_format
    model = SSD300().to(dev, memory_format=fmt)
    params = bc.param_count(model)
    model.train(a.mode == "train")
    run = bc.maybe_compile(model, a)
    x = torch.randn(a.batch, 3, 300, 300, device=dev).contiguous(memory_format=fmt)
    dboxes = default_boxes().to(dev)
    gloc, glabel = encoded_targets(a.batch, dboxes)
    opt = sgd(model, a, dev) if a.mode == "train" else None

    def step() -> tuple[int, torch.Tensor | None]:
        if a.mode == "infer":
            with torch.inference_mode(), prec.autocast():
                run(x)
            return a.batch, None
        with prec.autocast():
            ploc, plabel = run(x)
            loss = multibox_loss(ploc.float(), plabel.float(), gloc, glabel)
        bc.update(loss, opt, prec)
        return a.batch, loss.detach()

    rates, loss = bc.measure(step, a, dev)
    positives = float((glabel > 0).sum(1).float().mean())
    return bc.report(a, prec, rates, loss, model="ssd300", params=params, unit="img/s",
                     default_boxes=len(dboxes), positives_per_image=positives)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
