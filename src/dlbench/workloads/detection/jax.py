"""SSD300 v1.1 and its multibox loss in Flax (linen, NHWC), layer for layer the torch model.

Built from the classification module's ResNet-50 v1.5 pieces (`_Bottleneck` pads explicitly and
symmetrically like PyTorch and carries the stride on its 3x3 conv): stem, conv2_x, conv3_x, and conv4_x
with stride 1 (38x38 at 300x300), then five extra blocks with BatchNorm and six heads. The NHWC head
outputs are moved to NCHW before the reshape, so loc (B, 4, 8732) and conf (B, 81, 8732) hold every
default box at the index the torch model gives it. 22,894,902 trainable parameters.

Initialisation as torch: He (fan_out) for the backbone, Glorot-uniform for extras and heads, head biases
U(+-1/sqrt(fan_in)) (torch's conv default). Module paths map onto the torch module names, the
framework-neutral weight names (`neutral_name`), for `export_weights`/`load_weights`; kernels are HWIO
here, OIHW there. model.postprocess=true adds box decoding + per-class greedy NMS in fixed shapes (top 200
per class, a fixed-length suppression loop), traced into the inference step.
"""

from __future__ import annotations

import math
import re
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dlbench.backends.jax.family import JaxFamily, Network
from dlbench.core.spec import TaskSpec
from dlbench.workloads.classification.jax import _Bottleneck, _Layers
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
    RESNET_STAGES,
    DetectionConfig,
)

XAVIER = nn.initializers.glorot_uniform()


def _uniform(bound: float):
    return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -bound, bound)


class SSD300(_Layers):
    """image_size only matters below ~257 px, where the last two extra convs need padding (smoke runs)."""

    num_classes: int = NUM_CLASSES
    image_size: int = 300

    def conv_pad(self, features: int, kernel: int, stride: int, pad: int, name: str, bias_bound=None):
        return nn.Conv(
            features, (kernel, kernel), (stride, stride), padding=((pad, pad), (pad, pad)),
            use_bias=bias_bound is not None, kernel_init=XAVIER,
            bias_init=_uniform(bias_bound) if bias_bound is not None else nn.initializers.zeros,
            dtype=self.dtype, param_dtype=self.param_dtype, name=name,
        )  # fmt: skip

    def backbone(self, x, train: bool):
        x = nn.relu(self.bn(train, "stem_bn")(self.conv(64, 7, 2, name="stem_conv")(x)))
        x = nn.max_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)))
        dtypes = {"dtype": self.dtype, "param_dtype": self.param_dtype}
        for stage, (width, blocks, stride) in enumerate(RESNET_STAGES):
            for i in range(blocks):
                s = stride if i == 0 else 1
                x = _Bottleneck(width=width, stride=s, name=f"layer{stage + 1}_{i}", **dtypes)(x, train)
        return x

    def extra(self, x, i: int, pad: int, train: bool):
        """1x1 conv, BN, ReLU, 3x3 conv (stride 2 for the first three, else stride 1 padded `pad`), BN, ReLU."""
        name = f"extras_{i}"
        x = self.conv_pad(EXTRA_MID_CHANNELS[i], 1, 1, 0, f"{name}_conv1")(x)
        x = nn.relu(self.bn(train, f"{name}_bn1")(x))
        stride, pad = (2, 1) if i < 3 else (1, pad)
        x = self.conv_pad(FEATURE_CHANNELS[i + 1], 3, stride, pad, f"{name}_conv2")(x)
        return nn.relu(self.bn(train, f"{name}_bn2")(x))

    def head(self, x, channels: int, rows: int, name: str):
        """3x3 conv, then NHWC -> NCHW -> (B, rows, boxes) like torch's reshape of an NCHW map."""
        y = self.conv_pad(channels, 3, 1, 1, name, bias_bound=1.0 / math.sqrt(x.shape[-1] * 9))(x)
        return jnp.transpose(y, (0, 3, 1, 2)).reshape(y.shape[0], rows, -1)

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = self.backbone(x, train)
        feats = [x]
        pads = (0, 0, 0, *valid_conv_pads(self.image_size))
        for i in range(len(EXTRA_MID_CHANNELS)):
            x = self.extra(x, i, pads[i], train)
            feats.append(x)
        pairs = list(enumerate(zip(feats, BOXES_PER_CELL, strict=True)))
        loc = jnp.concatenate([self.head(f, n * 4, 4, f"loc_{i}") for i, (f, n) in pairs], axis=2)
        c = self.num_classes
        conf = jnp.concatenate([self.head(f, n * c, c, f"conf_{i}") for i, (f, n) in pairs], axis=2)
        return loc.astype(jnp.float32), conf.astype(jnp.float32)


def ssd_loss(ploc, pconf, gloc, glabel):
    """The torch backend's ssd_loss, op for op: Smooth-L1 on positives, cross-entropy on positives and the
    3x hardest negatives (rank from a double argsort), per-image normalisation by the positive count."""
    ploc, pconf, gloc = (t.astype(jnp.float32) for t in (ploc, pconf, gloc))
    glabel = glabel.astype(jnp.int32)
    mask = glabel > 0
    maskf = mask.astype(jnp.float32)
    pos_num = maskf.sum(1)
    diff = jnp.abs(ploc - gloc)
    sl1 = jnp.where(diff < 1.0, 0.5 * diff * diff, diff - 0.5).sum(1)
    sl1 = (maskf * sl1).sum(1)
    logp = jax.nn.log_softmax(pconf, axis=1)
    con = -jnp.take_along_axis(logp, glabel[:, None, :], axis=1)[:, 0]
    con_neg = jnp.where(mask, 0.0, jax.lax.stop_gradient(con))
    order = jnp.argsort(con_neg, axis=1, descending=True)
    rank = jnp.argsort(order, axis=1)
    neg_num = jnp.minimum(NEG_POS_RATIO * pos_num, mask.shape[1])[:, None]
    chosen = mask | (rank < neg_num)
    closs = (con * chosen.astype(jnp.float32)).sum(1)
    has_pos = (pos_num > 0).astype(jnp.float32)
    return ((sl1 + closs) * has_pos / jnp.maximum(pos_num, 1e-6)).mean()


def decode_boxes(loc, dboxes: DefaultBoxes):
    """Offsets (B, 4, A) -> ltrb boxes (B, A, 4), as dlbench.workloads.detection.boxes.decode."""
    d = jnp.asarray(dboxes.xywh)
    loc = jnp.transpose(loc.astype(jnp.float32), (0, 2, 1))
    xy = loc[..., :2] * dboxes.scale_xy * d[:, 2:] + d[:, :2]
    wh = jnp.exp(loc[..., 2:] * dboxes.scale_wh) * d[:, 2:]
    return jnp.concatenate([xy - wh / 2, xy + wh / 2], axis=-1)


def _iou(boxes):
    """IoU of every box with every other, (k, 4) ltrb -> (k, k)."""
    lt = jnp.maximum(boxes[:, None, :2], boxes[None, :, :2])
    rb = jnp.minimum(boxes[:, None, 2:], boxes[None, :, 2:])
    inter = jnp.prod(jnp.clip(rb - lt, 0.0, None), axis=-1)
    area = jnp.prod(boxes[:, 2:] - boxes[:, :2], axis=-1)
    return inter / (area[:, None] + area[None, :] - inter)


def _nms_keep(boxes, valid, iou_threshold: float):
    """Greedy NMS over candidates sorted by descending score: which of them are kept, (k,) bool. A fixed
    number of steps (one per candidate), so it compiles once."""
    overlap = _iou(boxes) >= iou_threshold
    later = jnp.arange(boxes.shape[0])[None, :] > jnp.arange(boxes.shape[0])[:, None]

    def visit(i, keep):
        return keep & ~(overlap[i] & later[i] & keep[i])

    return jax.lax.fori_loop(0, boxes.shape[0], visit, valid)


def postprocess(
    loc,
    conf,
    dboxes: DefaultBoxes,
    score_threshold: float = SCORE_THRESHOLD,
    iou_threshold: float = IOU_THRESHOLD,
    max_per_class: int = MAX_PER_CLASS,
    max_output: int = MAX_OUTPUT,
):
    """DLE's decode + per-class NMS for the whole batch, in fixed shapes: softmax, each class's 200 best
    default boxes as its candidates (those over the score threshold valid), greedy NMS per (image, class),
    the 200 best kept per image. Returns boxes (B, M, 4) ltrb, scores (B, M), labels (B, M) with label 0
    in unused slots (M = max_output)."""
    boxes = decode_boxes(loc, dboxes)
    probs = jax.nn.softmax(conf.astype(jnp.float32), axis=1)[:, 1:]  # (B, C-1, A): background dropped
    scores, idx = jax.lax.top_k(probs, min(max_per_class, dboxes.count))  # (B, C-1, k), descending
    cand = jax.vmap(lambda b, i: b[i])(boxes, idx)  # (B, C-1, k, 4)
    keep = jax.vmap(jax.vmap(lambda bx, v: _nms_keep(bx, v, iou_threshold)))(cand, scores > score_threshold)
    b, c1, k = scores.shape
    flat = jnp.where(keep, scores, -1.0).reshape(b, c1 * k)
    best, pick = jax.lax.top_k(flat, min(max_output, c1 * k))
    used = best > 0
    out_boxes = jnp.take_along_axis(cand.reshape(b, c1 * k, 4), pick[..., None], axis=1)
    labels = jnp.where(used, pick // k + 1, 0)
    return jnp.where(used[..., None], out_boxes, 0.0), jnp.where(used, best, 0.0), labels


# --- framework-neutral weights ----------------------------------------------------------------------
_BOTTLENECK = re.compile(r"layer(\d)_(\d+)")
_PART = re.compile(r"(extras|loc|conf)_(\d)(?:_(conv\d|bn\d))?")
_DOWN = {"down_conv": "downsample.0", "down_bn": "downsample.1"}
_LEAVES = {  # (collection, Flax leaf) -> (neutral leaf, conv kernel?)
    ("params", "kernel"): ("weight", True),
    ("params", "bias"): ("bias", False),
    ("params", "scale"): ("weight", False),
    ("batch_stats", "mean"): ("running_mean", False),
    ("batch_stats", "var"): ("running_var", False),
}


def neutral_name(path: tuple[str, ...]) -> str:
    """The torch module name of a Flax module path: ("layer3_0", "down_conv") -> backbone.layer3.0.downsample.0."""
    if path in (("stem_conv",), ("stem_bn",)):
        return "backbone." + ("conv1" if path[0] == "stem_conv" else "bn1")
    if (m := _BOTTLENECK.fullmatch(path[0])) and len(path) == 2:
        return f"backbone.layer{m[1]}.{m[2]}.{_DOWN.get(path[1], path[1])}"
    if (m := _PART.fullmatch(path[0])) and len(path) == 1:
        return ".".join(p for p in m.groups() if p)
    raise ValueError(f"SSD300 module {'/'.join(path)} has no neutral weight name")


def _entries(variables: dict) -> list[tuple[str, str, tuple[str, ...], bool]]:
    """(neutral name, collection, Flax path, conv kernel?) of every parameter and BN statistic."""
    out = []
    for collection in ("params", "batch_stats"):
        for keys, _ in jax.tree_util.tree_flatten_with_path(variables[collection])[0]:
            path = tuple(k.key for k in keys)
            leaf, kernel = _LEAVES[(collection, path[-1])]
            out.append((f"{neutral_name(path[:-1])}.{leaf}", collection, path, kernel))
    return out


def export_weights(net: Network) -> dict[str, np.ndarray]:
    """Parameters and BN statistics by neutral name, conv weights OIHW."""
    variables = jax.device_get(net.variables)
    out = {}
    for name, collection, path, kernel in _entries(variables):
        node = variables[collection]
        for part in path:
            node = node[part]
        w = np.asarray(node, dtype=np.float32)
        out[name] = (w.transpose(3, 2, 0, 1) if kernel else w).copy()
    return out


def load_weights(net: Network, weights: dict[str, np.ndarray]) -> None:
    """Load a neutral-name dict (torch layouts) into the network; every weight must be covered."""
    entries = _entries(net.variables)
    missing = sorted({e[0] for e in entries} ^ set(weights))
    if missing:
        raise ValueError(f"SSD300 weights do not fit: {missing[:3]}")
    new: dict[str, dict] = {"params": {}, "batch_stats": {}}
    for name, collection, path, kernel in entries:
        w = np.asarray(weights[name], dtype=np.float32)
        node = new[collection]
        for part in path[:-1]:
            node = node.setdefault(part, {})
        dtype = net.module.param_dtype if collection == "params" else jnp.float32
        node[path[-1]] = jnp.asarray(w.transpose(2, 3, 1, 0) if kernel else w, dtype)
    net.variables = {**net.variables, **new}


class DetectionJax(JaxFamily):
    """SSD300 v1.1 (DLE's network and multibox loss), in Flax."""

    def build_model(self, cfg: DetectionConfig, dtype: Any, param_dtype: Any) -> nn.Module:
        self.dboxes = default_boxes_for(cfg.image_size)
        self.postprocess = cfg.postprocess
        return SSD300(
            num_classes=cfg.num_classes, image_size=cfg.image_size, dtype=dtype, param_dtype=param_dtype
        )

    def infer(self, net: Network, variables: dict, inputs: tuple) -> Any:
        """DLE's timed inference is the forward pass; model.postprocess=true adds decoding and NMS (traced
        into the same jitted step)."""
        loc, conf = net.module.apply(variables, *inputs, train=False)
        return postprocess(loc, conf, self.dboxes) if self.postprocess else (loc, conf)

    export_weights = staticmethod(export_weights)
    load_weights = staticmethod(load_weights)

    def dali_source(self, bench: Any) -> Any:
        """COCO through DLE's SSD300 input pipeline (boxes encoded to the default boxes by DALI), through
        DALI's JAX plugin."""
        from dlbench.backends.jax.dali_source import CocoSource

        return CocoSource(bench.job, bench.dev, bench.prec)

    def loss(self, spec: TaskSpec) -> Any:
        """DLE's multibox loss (localization + confidence with hard negative mining)."""
        return lambda outputs, loc, labels: ssd_loss(*outputs, loc, labels)
