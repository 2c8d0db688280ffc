"""SSD300 v1.1 (NVIDIA DeepLearningExamples, PyTorch/Detection/SSD) and its multibox loss, in PyTorch.

The reference the Keras and Gluon versions match layer for layer:
- backbone: torchvision's ResNet-50 v1.5 (the network the classification models use) cut after conv4_x
  (layer3), with the first conv4_x block's strides set to 1, so conv4_x keeps the 38x38 map;
- five extra blocks (1x1 conv, BN, ReLU, 3x3 conv, BN, ReLU; stride 2 for the first three, an unpadded
  stride-1 conv for the last two) giving 19, 10, 5, 3 and 1;
- six 3x3 heads per map for locations (4 per default box) and class scores (81 per default box).
Outputs loc (B, 4, 8732) and conf (B, 81, 8732). 22,894,902 parameters at 81 classes.

Initialisation as DLE: torchvision's for the backbone, Xavier-uniform weights for extras and heads.

Module names double as the framework-neutral weight names (`export_weights`/`load_weights`): the other
backends map their layers onto these keys, so one dict of numpy arrays loads into all three.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from dlbench.backends.torch.family import TorchFamily
from dlbench.core.spec import TaskSpec
from dlbench.workloads.detection.boxes import (
    IOU_THRESHOLD,
    MAX_OUTPUT,
    MAX_PER_CLASS,
    NUM_CLASSES,
    SCORE_THRESHOLD,
    DefaultBoxes,
    default_boxes_for,
    valid_conv_pads,
)
from dlbench.workloads.detection.spec import (
    BOXES_PER_CELL,
    EXTRA_MID_CHANNELS,
    FEATURE_CHANNELS,
    NEG_POS_RATIO,
    DetectionConfig,
)


def _extra_block(cin: int, mid: int, cout: int, downsample: bool, pad: int = 0) -> nn.Sequential:
    stride, pad = (2, 1) if downsample else (1, pad)
    return nn.Sequential(
        OrderedDict(
            conv1=nn.Conv2d(cin, mid, 1, bias=False),
            bn1=nn.BatchNorm2d(mid),
            relu1=nn.ReLU(inplace=True),
            conv2=nn.Conv2d(mid, cout, 3, stride, pad, bias=False),
            bn2=nn.BatchNorm2d(cout),
            relu2=nn.ReLU(inplace=True),
        )
    )


class SSD300(nn.Module):
    """image_size only matters below ~257 px, where the last two extra convs need padding (smoke runs)."""

    def __init__(
        self, num_classes: int = NUM_CLASSES, image_size: int = 300, postprocess: bool = False
    ) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.dboxes = default_boxes_for(image_size)
        self.postprocess = postprocess  # infer() adds decoding + NMS (model.postprocess)
        pads = (0, 0, 0, *valid_conv_pads(image_size))
        r = torchvision.models.resnet50(weights=None)
        block = r.layer3[0]  # conv4_x at stride 1 (DLE: conv1, conv2 and the downsample conv)
        block.conv1.stride = block.conv2.stride = block.downsample[0].stride = (1, 1)
        self.backbone = nn.Sequential(
            OrderedDict(
                conv1=r.conv1, bn1=r.bn1, relu=r.relu, maxpool=r.maxpool,
                layer1=r.layer1, layer2=r.layer2, layer3=r.layer3,
            )
        )  # fmt: skip
        chans = FEATURE_CHANNELS
        self.extras = nn.ModuleList(
            _extra_block(chans[i], EXTRA_MID_CHANNELS[i], chans[i + 1], downsample=i < 3, pad=pads[i])
            for i in range(len(EXTRA_MID_CHANNELS))
        )
        self.loc = nn.ModuleList(
            nn.Conv2d(c, n * 4, 3, padding=1) for c, n in zip(chans, BOXES_PER_CELL, strict=True)
        )
        self.conf = nn.ModuleList(
            nn.Conv2d(c, n * num_classes, 3, padding=1) for c, n in zip(chans, BOXES_PER_CELL, strict=True)
        )
        for module in (*self.extras, *self.loc, *self.conf):
            for p in module.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.backbone(x)
        feats = [x]
        for block in self.extras:
            x = block(x)
            feats.append(x)
        b = x.shape[0]
        loc = torch.cat([head(f).reshape(b, 4, -1) for f, head in zip(feats, self.loc, strict=True)], 2)
        conf = torch.cat(
            [head(f).reshape(b, self.num_classes, -1) for f, head in zip(feats, self.conf, strict=True)], 2
        )
        return loc, conf


def build_model(cfg: DetectionConfig) -> SSD300:
    return SSD300(cfg.num_classes, cfg.image_size, cfg.postprocess)


def infer(model: SSD300, inputs: tuple) -> tuple:
    """DLE's timed inference is the forward pass; model.postprocess=true adds decoding and NMS."""
    loc, conf = model(*inputs)
    return postprocess(loc, conf, model.dboxes) if model.postprocess else (loc, conf)


def ssd_loss(
    ploc: torch.Tensor, pconf: torch.Tensor, gloc: torch.Tensor, glabel: torch.Tensor
) -> torch.Tensor:
    """DLE's multibox loss on encoded targets: Smooth-L1 over the positives' offsets plus cross-entropy
    over the positives and the 3x as many hardest negatives (picked by a double sort: no per-image loop),
    per image divided by its positive count, images without positives contributing 0, batch mean.

    ploc/gloc (B, 4, A) offsets, pconf (B, C, A) logits, glabel (B, A) with 0 = background."""
    ploc, pconf, gloc, glabel = ploc.float(), pconf.float(), gloc.float(), glabel.long()
    mask = glabel > 0
    pos_num = mask.sum(1)
    sl1 = F.smooth_l1_loss(ploc, gloc, reduction="none").sum(1)
    sl1 = (mask.float() * sl1).sum(1)
    con = F.cross_entropy(pconf, glabel, reduction="none")
    con_neg = con.detach().masked_fill(mask, 0.0)
    _, order = con_neg.sort(1, descending=True)
    _, rank = order.sort(1)
    neg_num = torch.clamp(NEG_POS_RATIO * pos_num, max=mask.shape[1]).unsqueeze(-1)
    chosen = mask | (rank < neg_num)
    closs = (con * chosen.float()).sum(1)
    has_pos = (pos_num > 0).float()
    return ((sl1 + closs) * has_pos / pos_num.float().clamp(min=1e-6)).mean()


def decode_boxes(loc: torch.Tensor, dboxes: DefaultBoxes) -> torch.Tensor:
    """Offsets (B, 4, A) -> ltrb boxes (B, A, 4), as dlbench.workloads.detection.boxes.decode."""
    d = torch.as_tensor(dboxes.xywh, device=loc.device)
    loc = loc.float().transpose(1, 2)
    xy = loc[..., :2] * dboxes.scale_xy * d[:, 2:] + d[:, :2]
    wh = torch.exp(loc[..., 2:] * dboxes.scale_wh) * d[:, 2:]
    return torch.cat([xy - wh / 2, xy + wh / 2], dim=-1)


def postprocess(
    loc: torch.Tensor,
    conf: torch.Tensor,
    dboxes: DefaultBoxes,
    score_threshold: float = SCORE_THRESHOLD,
    iou_threshold: float = IOU_THRESHOLD,
    max_per_class: int = MAX_PER_CLASS,
    max_output: int = MAX_OUTPUT,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DLE's decode + per-class NMS for the whole batch at once with torchvision's batched_nms:
    softmax, each class's 200 best default boxes over the score threshold, NMS per (image, class),
    the 200 best per image. Returns boxes (B, M, 4) ltrb, scores (B, M), labels (B, M) with label 0
    in unused slots (M = max_output)."""
    from torchvision.ops import batched_nms

    boxes = decode_boxes(loc, dboxes)
    probs = F.softmax(conf.float(), dim=1)[:, 1:]  # (B, C-1, A): background dropped
    b, c1, a = probs.shape
    scores, idx = probs.topk(min(max_per_class, a), dim=2)
    cand = boxes[torch.arange(b, device=idx.device)[:, None, None], idx]  # (B, C-1, k, 4)
    keep_mask = scores > score_threshold
    image = torch.arange(b, device=idx.device)[:, None, None].expand_as(scores)[keep_mask]
    label = torch.arange(1, c1 + 1, device=idx.device)[None, :, None].expand_as(scores)[keep_mask]
    flat_boxes, flat_scores = cand[keep_mask], scores[keep_mask]
    keep = batched_nms(flat_boxes, flat_scores, image * (c1 + 1) + label, iou_threshold)  # by score, desc
    keep = keep[torch.sort(image[keep], stable=True).indices]  # grouped by image, score order kept
    img = image[keep]
    starts = torch.cumsum(torch.bincount(img, minlength=b), 0) - torch.bincount(img, minlength=b)
    rank = torch.arange(len(keep), device=keep.device) - starts[img]
    sel = rank < max_output
    keep, img, rank = keep[sel], img[sel], rank[sel]
    out_boxes = boxes.new_zeros(b, max_output, 4)
    out_scores = boxes.new_zeros(b, max_output)
    out_labels = torch.zeros(b, max_output, dtype=torch.long, device=boxes.device)
    out_boxes[img, rank], out_scores[img, rank], out_labels[img, rank] = (
        flat_boxes[keep],
        flat_scores[keep],
        label[keep],
    )
    return out_boxes, out_scores, out_labels


def export_weights(model: nn.Module) -> dict[str, np.ndarray]:
    """Parameters and BN statistics by neutral name (the state_dict keys), conv weights OIHW."""
    return {
        k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items() if "num_batches" not in k
    }


def load_weights(model: nn.Module, weights: dict[str, np.ndarray]) -> None:
    state = {k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()}
    missing, unexpected = model.load_state_dict(state, strict=True)
    missing = [k for k in missing if "num_batches" not in k]
    if missing or unexpected:
        raise ValueError(f"SSD300 weights do not fit: missing {missing[:3]}, unexpected {unexpected[:3]}")


class DetectionTorch(TorchFamily):
    """SSD300 v1.1 (DLE's network, multibox loss, decoding + NMS, COCO fed by DALI), in PyTorch."""

    build_model = staticmethod(build_model)
    infer = staticmethod(infer)
    export_weights = staticmethod(export_weights)
    load_weights = staticmethod(load_weights)

    def loss(self, spec: TaskSpec) -> Any:
        """DLE's multibox loss (localization + confidence with hard negative mining)."""
        return lambda outputs, loc, labels: ssd_loss(*outputs, loc, labels)

    def dali_source(self, bench: Any) -> Any:
        """COCO through DLE's SSD300 input pipeline (boxes encoded to the default boxes by DALI)."""
        from dlbench.backends.torch.dali_source import CocoSource

        return CocoSource(bench.job, bench.dev, bench.memory_format, bench.prec)
