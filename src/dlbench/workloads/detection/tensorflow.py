"""SSD300 v1.1 and its multibox loss in Keras 3 (functional, NHWC), layer for layer the torch model.

Built from the classification module's ResNet-50 v1.5 pieces (`_conv` pads explicitly and
symmetrically like PyTorch, `_bottleneck` carries the stride on its 3x3 conv): stem, conv2_x, conv3_x,
and conv4_x with stride 1 (38x38 at 300x300), then five extra blocks with BatchNorm and six heads. The
NHWC head outputs are permuted to NCHW before the reshape, so loc (B, 4, 8732) and conf (B, 81, 8732)
hold every default box at the index the torch model gives it. 22,894,902 trainable parameters.

Initialisation as torch: He (fan_out) for the backbone, Glorot-uniform for extras and heads, head biases
U(+-1/sqrt(fan_in)) (torch's conv default). Layer names map onto the torch module names, the
framework-neutral weight names (`neutral_name`), for `export_weights`/`load_weights`.
"""

from __future__ import annotations

import math
import re
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from dlbench.backends.tensorflow.family import TFFamily
from dlbench.core.spec import TaskSpec
from dlbench.workloads.classification.tensorflow import _bn, _bottleneck, _conv
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

XAVIER = keras.initializers.GlorotUniform  # a factory: one fresh initializer per layer (see _conv)


def _backbone(x):
    x = layers.ReLU()(_bn(_conv(x, 64, 7, 2, name="stem_conv"), "stem_bn"))
    x = layers.ZeroPadding2D(1)(x)  # after ReLU: zeros equal torch's -inf max-pool padding
    x = layers.MaxPooling2D(3, strides=2)(x)
    for stage, (width, blocks, stride) in enumerate(RESNET_STAGES):
        for i in range(blocks):
            x = _bottleneck(x, width, stride if i == 0 else 1, f"layer{stage + 1}_{i}")
    return x


def _extra_block(x, mid: int, cout: int, downsample: bool, name: str, pad: int = 0):
    x = layers.ReLU()(_bn(_conv(x, mid, 1, init=XAVIER, name=f"{name}_conv1"), f"{name}_bn1"))
    if downsample:
        x = _conv(x, cout, 3, 2, init=XAVIER, name=f"{name}_conv2")
    else:  # unpadded 3x3 (5 -> 3 -> 1); padded ("same" = 1 on every side) below a 3-wide map
        padding = "same" if pad else "valid"
        x = layers.Conv2D(
            cout, 3, padding=padding, use_bias=False, kernel_initializer=XAVIER(), name=f"{name}_conv2"
        )(x)
    return layers.ReLU()(_bn(x, f"{name}_bn2"))


def _head(x, channels: int, rows: int, name: str):
    """3x3 conv, then NHWC -> NCHW -> (B, rows, boxes) like torch's reshape of an NCHW map."""
    bound = 1.0 / math.sqrt(x.shape[-1] * 9)
    y = layers.Conv2D(
        channels,
        3,
        padding="same",
        kernel_initializer=XAVIER(),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound),
        name=name,
    )(x)
    y = layers.Permute((3, 1, 2))(y)
    return layers.Reshape((rows, -1))(y)


def ssd300(
    num_classes: int = NUM_CLASSES, image_size: int = 300, input_dtype: str = "float32"
) -> keras.Model:
    """Build under the current Keras dtype policy; outputs are cast to float32 for the loss."""
    inputs = keras.Input(shape=(image_size, image_size, 3), dtype=input_dtype, name="images")
    x = _backbone(inputs)
    feats = [x]
    pads = (0, 0, 0, *valid_conv_pads(image_size))
    for i, mid in enumerate(EXTRA_MID_CHANNELS):
        x = _extra_block(x, mid, FEATURE_CHANNELS[i + 1], downsample=i < 3, name=f"extras{i}", pad=pads[i])
        feats.append(x)
    locs = [_head(f, n * 4, 4, f"loc{i}") for i, (f, n) in enumerate(zip(feats, BOXES_PER_CELL, strict=True))]
    confs = [
        _head(f, n * num_classes, num_classes, f"conf{i}")
        for i, (f, n) in enumerate(zip(feats, BOXES_PER_CELL, strict=True))
    ]
    loc = layers.Activation("linear", dtype="float32", name="loc")(layers.Concatenate(axis=2)(locs))
    conf = layers.Activation("linear", dtype="float32", name="conf")(layers.Concatenate(axis=2)(confs))
    return keras.Model(inputs, [loc, conf], name="ssd300")


def ssd_loss(ploc, pconf, gloc, glabel):
    """The torch backend's ssd_loss, op for op: Smooth-L1 on positives, cross-entropy on positives and the
    3x hardest negatives (rank from a double argsort), per-image normalisation by the positive count.
    No int32 tensor of the batch's size: TF's GPU kernels of int32 comparisons and arithmetic keep their
    tensors in host memory, so outside XLA they went to the host and back every step (labels are int64, and
    the second argsort sorts the order as float32, exact below 2^24 anchors)."""
    ploc, pconf, gloc = (tf.cast(t, tf.float32) for t in (ploc, pconf, gloc))
    glabel = tf.cast(glabel, tf.int64)
    mask = glabel > 0
    maskf = tf.cast(mask, tf.float32)
    pos_num = tf.reduce_sum(maskf, 1)
    diff = tf.abs(ploc - gloc)
    sl1 = tf.reduce_sum(tf.where(diff < 1.0, 0.5 * diff * diff, diff - 0.5), 1)
    sl1 = tf.reduce_sum(maskf * sl1, 1)
    con = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=glabel, logits=tf.transpose(pconf, (0, 2, 1)))
    con_neg = tf.where(mask, tf.zeros_like(con), tf.stop_gradient(con))
    order = tf.argsort(con_neg, axis=1, direction="DESCENDING")
    rank = tf.argsort(tf.cast(order, tf.float32), axis=1)
    neg_num = tf.minimum(NEG_POS_RATIO * pos_num, tf.cast(tf.shape(mask)[1], tf.float32))[:, None]
    chosen = tf.logical_or(mask, tf.cast(rank, tf.float32) < neg_num)
    closs = tf.reduce_sum(con * tf.cast(chosen, tf.float32), 1)
    has_pos = tf.cast(pos_num > 0, tf.float32)
    return tf.reduce_mean((sl1 + closs) * has_pos / tf.maximum(pos_num, 1e-6))


def decode_boxes(loc, dboxes: DefaultBoxes):
    """Offsets (B, 4, A) -> ltrb boxes (B, A, 4), as dlbench.workloads.detection.boxes.decode."""
    d = tf.constant(dboxes.xywh)
    loc = tf.transpose(tf.cast(loc, tf.float32), (0, 2, 1))
    xy = loc[..., :2] * dboxes.scale_xy * d[:, 2:] + d[:, :2]
    wh = tf.exp(loc[..., 2:] * dboxes.scale_wh) * d[:, 2:]
    return tf.concat([xy - wh / 2, xy + wh / 2], axis=-1)


def postprocess(
    loc,
    conf,
    dboxes: DefaultBoxes,
    score_threshold: float = SCORE_THRESHOLD,
    iou_threshold: float = IOU_THRESHOLD,
    max_per_class: int = MAX_PER_CLASS,
    max_output: int = MAX_OUTPUT,
):
    """DLE's decode + per-class NMS with tf.image.combined_non_max_suppression: softmax, each class's
    200 best default boxes as that class's candidates (class-specific boxes, q = classes), NMS per
    class over the score threshold, the 200 best per image. Returns boxes (B, M, 4) ltrb, scores (B, M),
    labels (B, M) with label 0 in unused slots."""
    boxes = decode_boxes(loc, dboxes)
    probs = tf.nn.softmax(tf.cast(conf, tf.float32), axis=1)[:, 1:]  # (B, C-1, A)
    scores, idx = tf.math.top_k(probs, k=min(max_per_class, dboxes.count))  # (B, C-1, k)
    cand = tf.gather(boxes, idx, batch_dims=1)  # (B, C-1, k, 4)
    out_boxes, out_scores, classes, _ = tf.image.combined_non_max_suppression(
        tf.transpose(cand, (0, 2, 1, 3)),
        tf.transpose(scores, (0, 2, 1)),
        max_output_size_per_class=max_per_class,
        max_total_size=max_output,
        iou_threshold=iou_threshold,
        score_threshold=score_threshold,
        clip_boxes=False,
    )  # IoU is the same for (x, y) as for the (y, x) order the op documents
    labels = tf.where(out_scores > 0, tf.cast(classes, tf.int64) + 1, tf.zeros_like(classes, tf.int64))
    return out_boxes, out_scores, labels


def build_model(cfg: DetectionConfig, float_dtype: str = "float32") -> keras.Model:
    model = ssd300(cfg.num_classes, cfg.image_size, float_dtype)
    model.ssd_dboxes = default_boxes_for(cfg.image_size)  # for infer(); not a weight
    model.ssd_postprocess = cfg.postprocess
    return model


def infer(model: keras.Model, inputs: tuple):
    """DLE's timed inference is the forward pass; model.postprocess=true adds decoding and NMS."""
    loc, conf = model(inputs[0], training=False)
    return postprocess(loc, conf, model.ssd_dboxes) if model.ssd_postprocess else (loc, conf)


_BOTTLENECK = re.compile(r"layer(\d)_(\d+)_(conv\d|bn\d|down_conv|down_bn)")
_SSD_PART = re.compile(r"(extras|loc|conf)(\d)(?:_(conv\d|bn\d))?")
_DOWN = {"down_conv": "downsample.0", "down_bn": "downsample.1"}


def neutral_name(layer_name: str) -> str | None:
    """The torch module name of a Keras layer (None for layers without weights of their own)."""
    if layer_name in ("stem_conv", "stem_bn"):
        return "backbone." + ("conv1" if layer_name == "stem_conv" else "bn1")
    if m := _BOTTLENECK.fullmatch(layer_name):
        return f"backbone.layer{m[1]}.{m[2]}.{_DOWN.get(m[3], m[3])}"
    if m := _SSD_PART.fullmatch(layer_name):
        return ".".join(p for p in m.groups() if p)
    return None


def _layer_arrays(layer) -> dict[str, np.ndarray]:
    """A conv's or BN's weights under torch's names and layouts (conv HWIO -> OIHW)."""
    if isinstance(layer, layers.BatchNormalization):
        names = ("weight", "bias", "running_mean", "running_var")
        return {n: np.asarray(w) for n, w in zip(names, layer.get_weights(), strict=True)}
    out = {"weight": np.asarray(layer.kernel).transpose(3, 2, 0, 1)}
    if layer.use_bias:
        out["bias"] = np.asarray(layer.bias)
    return out


def export_weights(model: keras.Model) -> dict[str, np.ndarray]:
    out = {}
    for layer in model.layers:
        if layer.weights and (name := neutral_name(layer.name)):
            out.update({f"{name}.{k}": v for k, v in _layer_arrays(layer).items()})
    return out


def load_weights(model: keras.Model, weights: dict[str, np.ndarray]) -> None:
    """Load a neutral-name dict (torch layouts) into the model; every weighted layer must be covered."""
    for layer in model.layers:
        if not layer.weights:
            continue
        name = neutral_name(layer.name)
        if name is None:
            raise ValueError(f"SSD300 layer {layer.name} has no neutral weight name")
        if isinstance(layer, layers.BatchNormalization):
            keys = ("weight", "bias", "running_mean", "running_var")
            layer.set_weights([weights[f"{name}.{k}"] for k in keys])
            continue
        arrays = [np.asarray(weights[f"{name}.weight"]).transpose(2, 3, 1, 0)]
        if layer.use_bias:
            arrays.append(weights[f"{name}.bias"])
        layer.set_weights(arrays)


class DetectionTF(TFFamily):
    """SSD300 v1.1 (DLE's network, multibox loss, decoding + NMS, COCO fed by DALI), in TensorFlow."""

    build_model = staticmethod(build_model)
    infer = staticmethod(infer)
    export_weights = staticmethod(export_weights)
    load_weights = staticmethod(load_weights)

    def loss(self, spec: TaskSpec) -> Any:
        """DLE's multibox loss (localization + confidence with hard negative mining)."""
        return lambda outputs, loc, labels: ssd_loss(*outputs, loc, labels)

    def dali_source(self, bench: Any) -> Any:
        """COCO through DLE's SSD300 input pipeline (boxes encoded to the default boxes by DALI)."""
        from dlbench.backends.tensorflow.dali_source import CocoSource

        return CocoSource(bench.job, bench._tf_device, bench.prec.plan.input_dtype)
