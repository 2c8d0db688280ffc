"""The synthetic data the TF and JAX yardsticks share, in numpy (framework-free, imports nothing from
dlbench): SSD300's default boxes and the random objects encoded to them, and the Transformer's random
sentence pairs. Each yardstick puts them on its device once; dlbench makes the same kind of batch from its
own task specs (workloads/detection/boxes.py, workloads/translation/token_batches.py).
"""

from __future__ import annotations

import argparse
import itertools
import math

import numpy as np

PAD, BOS, EOS, FIRST_WORD = 0, 1, 2, 4  # the Transformer's special token ids, as dlbench's


# ---- SSD300 ---------------------------------------------------------------------------------------------


def ssd300_flags(p: argparse.ArgumentParser) -> None:
    """SSD300's flags, the same in every framework's yardstick (so one command line pairs them all)."""
    p.add_argument("--batch", type=int, default=None, help="images per step (default 128 on CUDA, 2 on CPU)")
    p.add_argument("--image-size", type=int, default=300)
    p.add_argument("--num-classes", type=int, default=81)
    p.add_argument("--lr", type=float, default=2.6e-3)
    p.add_argument("--weight-decay", type=float, default=5e-4)


def default_boxes(feature_sizes: list[int], size: int) -> np.ndarray:
    """DLE's dboxes300_coco(): (A, 4) cx, cy, w, h in [0, 1] in the order the heads emit them (at 300x300
    exactly DLE's 8,732; other sizes scale the steps and box sizes to the maps the network makes)."""
    steps = [8, 16, 32, 64, 100, 300] if size == 300 else [size / f for f in feature_sizes]
    scales = [s * size / 300 for s in (21, 45, 99, 153, 207, 261, 315)]
    ratios = [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
    boxes = []
    for k, fsize in enumerate(feature_sizes):
        s1, s2 = scales[k] / size, scales[k + 1] / size
        sizes = [(s1, s1), (math.sqrt(s1 * s2),) * 2]
        for r in ratios[k]:
            w, h = s1 * math.sqrt(r), s1 / math.sqrt(r)
            sizes += [(w, h), (h, w)]
        fk = size / steps[k]
        for (w, h), (i, j) in itertools.product(sizes, itertools.product(range(fsize), repeat=2)):
            boxes.append(((j + 0.5) / fk, (i + 0.5) / fk, w, h))
    return np.clip(np.array(boxes, np.float32), 0, 1)


def ltrb(b: np.ndarray) -> np.ndarray:
    return np.concatenate([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], 1)


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lt, rb = np.maximum(a[:, None, :2], b[None, :, :2]), np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), -1)
    area = lambda x: np.prod(x[:, 2:] - x[:, :2], -1)  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None, :] - inter)


def encoded_targets(n: int, dboxes: np.ndarray, classes: int, rng: np.random.Generator, max_objects: int = 8):
    """Random objects per image encoded to the default boxes (DALI's box_encoder with offsets): gloc (n, 4, A)
    = ((cx, cy) - default) / default wh / 0.1 and log(wh / default wh) / 0.2 on matched boxes, 0 elsewhere;
    glabel (n, A) int32, 0 = background."""
    d = ltrb(dboxes)
    locs, labels = [], []
    for _ in range(n):
        k = int(rng.integers(1, max_objects + 1))
        lt = rng.random((k, 2)) * 0.7
        obj = np.concatenate([lt, np.minimum(lt + 0.05 + rng.random((k, 2)) * 0.4, 1.0)], 1)
        m = iou(obj, d)  # (k, A)
        best_iou, best_obj = m.max(0), m.argmax(0)
        best_box = m.argmax(1)
        best_iou[best_box], best_obj[best_box] = 2.0, np.arange(k)
        match = best_iou > 0.5
        label = np.zeros(len(dboxes), np.int32)
        label[match] = rng.integers(1, classes, k)[best_obj[match]]
        o, db = obj[best_obj[match]], dboxes[match]
        xy, wh = (o[:, :2] + o[:, 2:]) / 2, o[:, 2:] - o[:, :2]
        offsets = np.zeros((len(dboxes), 4), np.float32)
        offsets[match] = np.concatenate([(xy - db[:, :2]) / db[:, 2:] / 0.1, np.log(wh / db[:, 2:]) / 0.2], 1)
        locs.append(offsets.T)
        labels.append(label)
    return np.stack(locs).astype(np.float32), np.stack(labels)


# ---- Transformer ----------------------------------------------------------------------------------------


def transformer_flags(p: argparse.ArgumentParser) -> None:
    """Transformer-base's flags, the same in the TF and JAX yardsticks."""
    p.add_argument(
        "--batch-tokens", type=int, default=None, help="padded target tokens per batch (5120; CPU 256)"
    )
    p.add_argument("--min-len", type=int, default=8)
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--decode-len", type=int, default=None, help="greedy decoding steps (default --max-len)")
    p.add_argument("--pool", type=int, default=8, help="distinct synthetic batches, cycled")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--d-ff", type=int, default=2048)
    p.add_argument("--layers", type=int, default=6, help="encoder layers, and as many decoder layers")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr-warmup", type=int, default=4000, help="Adam's warm-up steps (the paper's 4,000)")
    p.add_argument(
        "--loop", choices=("host", "device"), default="host",
        help="greedy decoding's loop over positions: host (one compiled call per position) or device (every "
        "position in one compiled call: a while loop the compiler sees whole; needs the compiled step)",
    )  # fmt: skip


def sentence_pairs(n: int, a: argparse.Namespace, rng: np.random.Generator):
    """n random pairs, lengths uniform in [min_len, max_len], padded to max_len: (src, tgt_in, labels) int32.
    The decoder reads BOS + target[:-1] and is trained to emit the target, which ends with EOS."""

    def tokens(lengths: np.ndarray) -> np.ndarray:
        ids = rng.integers(FIRST_WORD, a.vocab, (n, a.max_len))
        pos = np.arange(a.max_len)
        ids[pos == (lengths - 1)[:, None]] = EOS
        ids[pos >= lengths[:, None]] = PAD
        return ids.astype(np.int32)

    src = tokens(rng.integers(a.min_len, a.max_len + 1, n))
    labels = tokens(rng.integers(a.min_len, a.max_len + 1, n))
    tgt_in = np.concatenate([np.full((n, 1), BOS, np.int32), labels[:, :-1]], 1)
    tgt_in[labels == PAD] = PAD
    return src, tgt_in, labels
