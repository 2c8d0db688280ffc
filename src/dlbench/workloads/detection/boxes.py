"""SSD300 default boxes, target encoding and box decoding, in numpy (framework-neutral).

Matches NVIDIA DeepLearningExamples' PyTorch SSD v1.1 (ssd/utils.py: DefaultBoxes, dboxes300_coco,
Encoder) so that every framework trains on the same targets:

- 8,732 default boxes over six feature maps (38, 19, 10, 5, 3, 1), ordered per map by box shape,
  then row, then column: the order the heads' `reshape(B, 4, -1)` produces from NCHW outputs.
- Matching: a default box takes the ground truth it overlaps most when that IoU exceeds 0.5; every
  ground truth also takes its single best default box whatever the IoU (so no object goes unmatched).
- Targets are offsets, not boxes: ((cx - dcx) / dw / 0.1, (cy - dcy) / dh / 0.1, log(w / dw) / 0.2,
  log(h / dh) / 0.2). DLE computes these inside its loss (`_loc_vec`); here the data side does it once
  (DALI's `fn.box_encoder(offset=True)` on real data, `encode` for synthetic data) so the loss in each
  framework is a plain Smooth-L1 on offsets. Background boxes get zero offsets (the loss masks them).

Coordinates are fractions of the image (0..1); "ltrb" is (left, top, right, bottom), "xywh" is
(centre x, centre y, width, height).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from math import sqrt

import numpy as np

SCALE_XY = 0.1  # DLE DefaultBoxes(scale_xy=0.1)
SCALE_WH = 0.2  # DLE DefaultBoxes(scale_wh=0.2)
IOU_CRITERIA = 0.5
NUM_CLASSES = 81  # 80 COCO categories + background (label 0)


@dataclass(frozen=True)
class DefaultBoxes:
    """The default (anchor) boxes of an SSD, in both orders, float32."""

    fig_size: int
    feat_size: tuple[int, ...]
    xywh: np.ndarray = field(repr=False)
    ltrb: np.ndarray = field(repr=False)
    boxes_per_cell: tuple[int, ...] = ()
    scale_xy: float = SCALE_XY
    scale_wh: float = SCALE_WH

    @property
    def count(self) -> int:
        return len(self.xywh)

    @property
    def variances(self) -> list[float]:
        """The `stds` of DALI's box encoder: (x, y, w, h) offsets are divided by these."""
        return [self.scale_xy, self.scale_xy, self.scale_wh, self.scale_wh]


def default_boxes(
    fig_size: int,
    feat_size: tuple[int, ...],
    steps: tuple[float, ...],
    scales: tuple[float, ...],
    aspect_ratios: tuple[tuple[int, ...], ...],
) -> DefaultBoxes:
    """DLE's DefaultBoxes: per map two square boxes (scale s_k and sqrt(s_k s_k+1)) plus a pair per
    aspect ratio, centred on each cell; xywh clamped to [0, 1] before the ltrb copy is derived."""
    boxes: list[tuple[float, float, float, float]] = []
    per_cell: list[int] = []
    for idx, sfeat in enumerate(feat_size):
        fk = fig_size / steps[idx]
        sk1 = scales[idx] / fig_size
        sk2 = scales[idx + 1] / fig_size
        sk3 = sqrt(sk1 * sk2)
        sizes = [(sk1, sk1), (sk3, sk3)]
        for alpha in aspect_ratios[idx]:
            w, h = sk1 * sqrt(alpha), sk1 / sqrt(alpha)
            sizes += [(w, h), (h, w)]
        per_cell.append(len(sizes))
        for w, h in sizes:
            for i, j in itertools.product(range(sfeat), repeat=2):
                boxes.append(((j + 0.5) / fk, (i + 0.5) / fk, w, h))
    xywh = np.clip(np.asarray(boxes, dtype=np.float32), 0.0, 1.0)
    return DefaultBoxes(fig_size, tuple(feat_size), xywh, xywh_to_ltrb(xywh), tuple(per_cell))


SCALES_300 = (21, 45, 99, 153, 207, 261, 315)
ASPECT_RATIOS = ((2,), (2, 3), (2, 3), (2, 3), (2,), (2,))


def dboxes300_coco() -> DefaultBoxes:
    """The 8,732 default boxes of SSD300 on COCO (DLE utils.dboxes300_coco)."""
    return default_boxes(
        fig_size=300,
        feat_size=(38, 19, 10, 5, 3, 1),
        steps=(8, 16, 32, 64, 100, 300),
        scales=SCALES_300,
        aspect_ratios=ASPECT_RATIOS,
    )


def _down(size: int) -> int:
    """A 3x3 stride-2 conv with padding 1 (or 7x7/2 pad 3, or 3x3 max-pool/2 pad 1): ceil(size / 2)."""
    return (size - 1) // 2 + 1


def valid_conv_pads(image_size: int) -> tuple[int, int]:
    """Padding of the last two extra blocks' 3x3 convs: 0 (DLE's unpadded 5 -> 3 -> 1) while the map
    is at least 3 wide, else 1, so smaller inputs (CPU smoke runs) keep every layer and parameter."""
    feats = feature_sizes(image_size)
    return tuple(0 if f >= 3 else 1 for f in feats[3:5])  # type: ignore[return-value]


def feature_sizes(image_size: int) -> tuple[int, ...]:
    """Side of the six maps the heads see, from the network's strides: (38, 19, 10, 5, 3, 1) at 300."""
    f = _down(_down(_down(image_size)))  # stem conv, max-pool, conv3_x (conv4_x keeps stride 1)
    sizes = [f]
    for _ in range(3):
        f = _down(f)
        sizes.append(f)
    for _ in range(2):
        f = f - 2 if f >= 3 else f
        sizes.append(f)
    return tuple(sizes)


def default_boxes_for(image_size: int) -> DefaultBoxes:
    """DLE's boxes at 300; at another input size the same six box shapes per cell with scales in
    proportion to the image, one set per cell of the maps the network really makes (smoke runs)."""
    if image_size == 300:
        return dboxes300_coco()
    feats = feature_sizes(image_size)
    return default_boxes(
        fig_size=image_size,
        feat_size=feats,
        steps=tuple(image_size / f for f in feats),
        scales=tuple(s * image_size / 300 for s in SCALES_300),
        aspect_ratios=ASPECT_RATIOS,
    )


def xywh_to_ltrb(b: np.ndarray) -> np.ndarray:
    half = 0.5 * b[..., 2:]
    return np.concatenate([b[..., :2] - half, b[..., :2] + half], axis=-1)


def ltrb_to_xywh(b: np.ndarray) -> np.ndarray:
    return np.concatenate([0.5 * (b[..., :2] + b[..., 2:]), b[..., 2:] - b[..., :2]], axis=-1)


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in a (N, 4) with every box in b (M, 4), both ltrb: (N, M)."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0.0, None), axis=-1)
    area_a = np.prod(a[:, 2:] - a[:, :2], axis=-1)
    area_b = np.prod(b[:, 2:] - b[:, :2], axis=-1)
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def encode(
    boxes: np.ndarray, labels: np.ndarray, dboxes: DefaultBoxes, criteria: float = IOU_CRITERIA
) -> tuple[np.ndarray, np.ndarray]:
    """One image's ground truth (boxes (n, 4) ltrb, labels (n,) in 1..80) as SSD targets:
    offsets (num_dboxes, 4) float32 and labels (num_dboxes,) int32 (0 = background)."""
    n_anchor = dboxes.count
    offsets = np.zeros((n_anchor, 4), np.float32)
    out_labels = np.zeros(n_anchor, np.int32)
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    if len(boxes) == 0:
        return offsets, out_labels
    ious = iou(boxes, dboxes.ltrb)  # (n, anchors)
    best_iou = ious.max(axis=0)
    best_gt = ious.argmax(axis=0)
    best_anchor = ious.argmax(axis=1)  # each ground truth's best default box ...
    best_iou[best_anchor] = 2.0  # ... is matched to it whatever the IoU
    best_gt[best_anchor] = np.arange(len(boxes))
    mask = best_iou > criteria
    out_labels[mask] = np.asarray(labels).reshape(-1)[best_gt[mask]]
    offsets[mask] = box_offsets(boxes[best_gt[mask]], dboxes.xywh[mask], dboxes)
    return offsets, out_labels


def box_offsets(ltrb: np.ndarray, anchors_xywh: np.ndarray, dboxes: DefaultBoxes) -> np.ndarray:
    """The regression targets of boxes (ltrb) against their default boxes (xywh)."""
    g = ltrb_to_xywh(ltrb)
    xy = (g[:, :2] - anchors_xywh[:, :2]) / anchors_xywh[:, 2:] / dboxes.scale_xy
    wh = np.log(g[:, 2:] / anchors_xywh[:, 2:]) / dboxes.scale_wh
    return np.concatenate([xy, wh], axis=1).astype(np.float32)


def encode_batch(
    boxes: list[np.ndarray], labels: list[np.ndarray], dboxes: DefaultBoxes
) -> tuple[np.ndarray, np.ndarray]:
    """Targets for a batch in the models' layout: offsets (B, 4, anchors), labels (B, anchors)."""
    pairs = [encode(b, lab, dboxes) for b, lab in zip(boxes, labels, strict=True)]
    offsets = np.stack([p[0] for p in pairs]).transpose(0, 2, 1)
    return np.ascontiguousarray(offsets), np.stack([p[1] for p in pairs])


def decode(loc: np.ndarray, dboxes: DefaultBoxes) -> np.ndarray:
    """Predicted offsets (B, 4, anchors) back to ltrb boxes (B, anchors, 4) (DLE scale_back_batch)."""
    loc = np.transpose(loc, (0, 2, 1)).astype(np.float32)
    d = dboxes.xywh[None]
    xy = loc[..., :2] * dboxes.scale_xy * d[..., 2:] + d[..., :2]
    wh = np.exp(loc[..., 2:] * dboxes.scale_wh) * d[..., 2:]
    return xywh_to_ltrb(np.concatenate([xy, wh], axis=-1))


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# DLE's postprocess settings (Encoder.decode_batch), shared by the numpy reference and every framework's
# NMS variant so that model.postprocess=true does the same work everywhere.
SCORE_THRESHOLD = 0.05  # class scores at or below are dropped
IOU_THRESHOLD = 0.45  # NMS overlap
MAX_PER_CLASS = 200  # candidates per class before NMS
MAX_OUTPUT = 200  # detections per image after NMS


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Greedy non-maximum suppression: indices kept, by descending score (the reference the
    frameworks' NMS ops are checked against)."""
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size:
        i = order[0]
        keep.append(int(i))
        rest = order[1:]
        order = rest[iou(boxes[i : i + 1], boxes[rest])[0] < iou_threshold]
    return np.asarray(keep, dtype=np.int64)


@dataclass
class Detections:
    """One image's detections: boxes (k, 4) ltrb, scores (k,), labels (k,) in 1..num_classes-1."""

    boxes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray


def from_padded(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray) -> list[Detections]:
    """The frameworks' padded postprocess outputs (B, M, 4), (B, M), (B, M) with label 0 in unused
    slots, as one Detections per image."""
    out = []
    for b, s, lab in zip(np.asarray(boxes), np.asarray(scores), np.asarray(labels), strict=True):
        used = lab > 0
        out.append(
            Detections(b[used].astype(np.float32), s[used].astype(np.float32), lab[used].astype(np.int64))
        )
    return out


def postprocess(
    loc: np.ndarray,
    conf: np.ndarray,
    dboxes: DefaultBoxes,
    score_threshold: float = SCORE_THRESHOLD,
    iou_threshold: float = IOU_THRESHOLD,
    max_per_class: int = MAX_PER_CLASS,
    max_output: int = MAX_OUTPUT,
) -> list[Detections]:
    """Decode + per-class NMS as DLE's Encoder.decode_batch does: softmax over classes, drop background
    and scores <= 0.05, keep each class's 200 best candidates, NMS at IoU 0.45, keep the 200 best overall."""
    boxes = decode(loc, dboxes)
    probs = softmax(np.asarray(conf, np.float32), axis=1)  # (B, C, anchors)
    out = []
    for b in range(len(boxes)):
        keep_boxes, keep_scores, keep_labels = [], [], []
        for c in range(1, probs.shape[1]):
            idx = np.nonzero(probs[b, c] > score_threshold)[0]
            if idx.size == 0:
                continue
            idx = idx[np.argsort(-probs[b, c, idx], kind="stable")[:max_per_class]]
            kept = idx[nms(boxes[b, idx], probs[b, c, idx], iou_threshold)]
            keep_boxes.append(boxes[b, kept])
            keep_scores.append(probs[b, c, kept])
            keep_labels.append(np.full(len(kept), c, np.int64))
        if not keep_boxes:
            out.append(
                Detections(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64))
            )
            continue
        bx, sc, lb = np.concatenate(keep_boxes), np.concatenate(keep_scores), np.concatenate(keep_labels)
        top = np.argsort(-sc, kind="stable")[:max_output]
        out.append(Detections(bx[top], sc[top], lb[top]))
    return out
