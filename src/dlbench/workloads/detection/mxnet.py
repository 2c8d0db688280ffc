"""SSD300 v1.1 and its multibox loss in Gluon (NCHW), layer for layer the torch model.

Built from the classification module's ResNet-50 v1.5 pieces (`_conv`, `_Bottleneck`, `_BN`): stem,
conv2_x, conv3_x and conv4_x with stride 1, then five extra blocks with BatchNorm and six heads. Outputs
loc (B, 4, 8732) and conf (B, 81, 8732), in the torch model's default-box order (same NCHW reshape).
22,894,902 trainable parameters. GluonCV is not used: its SSDs are VGG/ResNet v1 variants, and it refuses
to import beside torch >= 2.

`initialize` follows torch: He (fan_out) normal for the backbone convs, Xavier-uniform for extra and head
weights, head biases U(+-1/sqrt(fan_in)). `named_layers` walks the network under the torch module names
(the framework-neutral weight names) for `export_weights`/`load_weights`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.family import MXNetFamily
from dlbench.core.spec import TaskSpec
from dlbench.workloads.classification.mxnet import _BN, _Bottleneck, _conv
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

nn = mx.gluon.nn
HybridBlock = mx.gluon.HybridBlock


def _extra_block(cin: int, mid: int, cout: int, downsample: bool, prefix: str, pad: int = 0) -> Any:
    stride, pad = (2, 1) if downsample else (1, pad)
    block = nn.HybridSequential(prefix=prefix)
    with block.name_scope():
        block.add(
            _conv(mid, 1, 1, 0, cin),
            nn.BatchNorm(in_channels=mid, **_BN),
            nn.Activation("relu"),
            _conv(cout, 3, stride, pad, mid),
            nn.BatchNorm(in_channels=cout, **_BN),
            nn.Activation("relu"),
        )
    return block


class SSD300(HybridBlock):
    """image_size only matters below ~257 px, where the last two extra convs need padding (smoke runs)."""

    def __init__(
        self, num_classes: int = NUM_CLASSES, image_size: int = 300, postprocess: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.dboxes = default_boxes_for(image_size)
        self.postprocess = postprocess  # infer() adds decoding + NMS (model.postprocess)
        pads = (0, 0, 0, *valid_conv_pads(image_size))
        chans = FEATURE_CHANNELS
        with self.name_scope():
            self.stem = nn.HybridSequential(prefix="stem_")
            self.stem.add(
                _conv(64, 7, 2, 3, 3),
                nn.BatchNorm(in_channels=64, **_BN),
                nn.Activation("relu"),
                nn.MaxPool2D(3, 2, 1),
            )
            self.stages = nn.HybridSequential(prefix="")
            cin = 64
            for s, (width, blocks, stride) in enumerate(RESNET_STAGES):
                stage = nn.HybridSequential(prefix=f"layer{s + 1}_")
                with stage.name_scope():
                    for i in range(blocks):
                        stage.add(_Bottleneck(cin, width, stride if i == 0 else 1, prefix=f"unit{i}_"))
                        cin = 4 * width
                self.stages.add(stage)
            self.extras = nn.HybridSequential(prefix="extras_")
            self.loc = nn.HybridSequential(prefix="loc_")
            self.conf = nn.HybridSequential(prefix="conf_")
            for i, mid in enumerate(EXTRA_MID_CHANNELS):
                self.extras.add(_extra_block(chans[i], mid, chans[i + 1], i < 3, prefix=f"{i}_", pad=pads[i]))
            for c, n in zip(chans, BOXES_PER_CELL, strict=True):
                self.loc.add(_conv(n * 4, 3, 1, 1, c, bias=True))
                self.conf.add(_conv(n * num_classes, 3, 1, 1, c, bias=True))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        x = self.stages(self.stem(x))
        feats = [x]
        for block in self.extras:
            x = block(x)
            feats.append(x)
        loc = F.concat(
            *[F.reshape(h(f), shape=(0, 4, -1)) for f, h in zip(feats, self.loc, strict=True)], dim=2
        )
        conf = F.concat(
            *[
                F.reshape(h(f), shape=(0, self.num_classes, -1))
                for f, h in zip(feats, self.conf, strict=True)
            ],
            dim=2,
        )
        return loc, conf


def build_model(cfg: DetectionConfig, train: bool = True) -> SSD300:
    """The uninitialized network (the caller picks context and dtype, then calls `initialize`)."""
    return SSD300(cfg.num_classes, cfg.image_size, cfg.postprocess, prefix="ssd300_")


def infer(net: SSD300, inputs: tuple) -> tuple:
    """DLE's timed inference is the forward pass; model.postprocess=true adds decoding and NMS."""
    loc, conf = net(*inputs)
    return postprocess(loc, conf, net.dboxes) if net.postprocess else (loc, conf)


def initialize(net: SSD300, cfg: DetectionConfig | None, ctx: Any) -> None:
    xavier = mx.init.Xavier(rnd_type="uniform", factor_type="avg", magnitude=3)
    for part in (net.extras, net.loc, net.conf):
        part.collect_params(r".*weight").setattr("init", xavier)
    for head in (*net.loc, *net.conf):
        fan_in = head._in_channels * 9
        head.bias.init = mx.init.Uniform(1.0 / math.sqrt(fan_in))
    net.initialize(mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2), ctx=ctx)


class SSDLoss(HybridBlock):
    """The torch backend's ssd_loss, op for op: Smooth-L1 on positives, cross-entropy on positives and the
    3x hardest negatives (rank from a double argsort), per-image normalisation by the positive count.
    Returns the per-image losses, as Gluon losses do (their mean is DLE's loss; Trainer.step(batch_size)
    takes it). glabel is float (MXNet picks with float indices)."""

    def hybrid_forward(self, F: Any, ploc: Any, pconf: Any, gloc: Any, glabel: Any) -> Any:
        ploc, pconf, gloc = (F.cast(t, "float32") for t in (ploc, pconf, gloc))
        mask = glabel > 0
        pos_num = F.sum(mask, axis=1)
        sl1 = F.sum(F.smooth_l1(ploc - gloc, scalar=1.0), axis=1)
        sl1 = F.sum(mask * sl1, axis=1)
        con = -F.pick(F.log_softmax(pconf, axis=1), glabel, axis=1)
        con_neg = F.stop_gradient(con) * (1 - mask)
        order = F.argsort(con_neg, axis=1, is_ascend=False)
        rank = F.argsort(order, axis=1)
        total = F.sum(F.ones_like(mask), axis=1)
        neg_num = F.minimum(NEG_POS_RATIO * pos_num, total)
        chosen = F.maximum(mask, F.broadcast_lesser(rank, F.expand_dims(neg_num, axis=1)))
        closs = F.sum(con * chosen, axis=1)
        has_pos = pos_num > 0
        return (sl1 + closs) * has_pos / F.maximum(pos_num, 1e-6)  # per image: Trainer.step(B) averages


def decode_boxes(loc: Any, dboxes: DefaultBoxes) -> Any:
    """Offsets (B, 4, A) -> ltrb boxes (B, A, 4), as dlbench.workloads.detection.boxes.decode."""
    d = mx.nd.array(dboxes.xywh, ctx=loc.context)
    loc = mx.nd.transpose(loc.astype("float32"), axes=(0, 2, 1))
    dxy, dwh = d[:, :2].expand_dims(0), d[:, 2:].expand_dims(0)
    xy = mx.nd.broadcast_add(mx.nd.broadcast_mul(loc[:, :, :2] * dboxes.scale_xy, dwh), dxy)
    wh = mx.nd.broadcast_mul(mx.nd.exp(loc[:, :, 2:] * dboxes.scale_wh), dwh)
    return mx.nd.concat(xy - wh / 2, xy + wh / 2, dim=2)


def postprocess(
    loc: Any,
    conf: Any,
    dboxes: DefaultBoxes,
    score_threshold: float = SCORE_THRESHOLD,
    iou_threshold: float = IOU_THRESHOLD,
    max_per_class: int = MAX_PER_CLASS,
    max_output: int = MAX_OUTPUT,
) -> tuple[Any, Any, Any]:
    """DLE's decode + per-class NMS with MXNet's box_nms: softmax, each class's 200 best default boxes
    over the score threshold as rows (class id, score, box), NMS per class id, the 200 best per image.
    Returns boxes (B, M, 4) ltrb, scores (B, M), labels (B, M) with label 0 in unused slots."""
    nd = mx.nd
    boxes = decode_boxes(loc, dboxes)
    b, a = boxes.shape[:2]
    probs = nd.softmax(conf.astype("float32"), axis=1).slice_axis(axis=1, begin=1, end=None)  # (B, C-1, A)
    c1, k = probs.shape[1], min(max_per_class, a)
    scores, idx = nd.topk(probs, axis=2, k=k, ret_typ="both")  # (B, C-1, k)
    offset = nd.arange(b, ctx=idx.context).reshape((b, 1, 1)) * a
    cand = nd.take(boxes.reshape((b * a, 4)), nd.broadcast_add(idx, offset))  # (B, C-1, k, 4)
    ids = nd.broadcast_like(nd.arange(1, c1 + 1, ctx=idx.context).reshape((1, c1, 1)), scores)
    rows = nd.concat(ids.expand_dims(3), scores.expand_dims(3), cand, dim=3).reshape((b, c1 * k, 6))
    # rows come back sorted by score; suppressed and invalid ones are -1
    out = nd.contrib.box_nms(
        rows, overlap_thresh=iou_threshold, valid_thresh=score_threshold, topk=-1,
        coord_start=2, score_index=1, id_index=0, force_suppress=False,
    )  # fmt: skip
    out = out.slice_axis(axis=1, begin=0, end=max_output)
    used = out[:, :, 0] > 0
    return out[:, :, 2:6] * used.expand_dims(2), out[:, :, 1] * used, (out[:, :, 0] * used).astype("int64")


def _bottleneck_layers(unit: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    body = unit.body
    for k, (ci, bi) in enumerate(((0, 1), (3, 4), (6, 7)), start=1):
        yield f"{prefix}.conv{k}", body[ci]
        yield f"{prefix}.bn{k}", body[bi]
    if unit.downsample is not None:
        yield f"{prefix}.downsample.0", unit.downsample[0]
        yield f"{prefix}.downsample.1", unit.downsample[1]


def named_layers(net: SSD300) -> Iterator[tuple[str, Any]]:
    """Every weighted layer under its torch module name."""
    yield "backbone.conv1", net.stem[0]
    yield "backbone.bn1", net.stem[1]
    for s, stage in enumerate(net.stages):
        for i, unit in enumerate(stage):
            yield from _bottleneck_layers(unit, f"backbone.layer{s + 1}.{i}")
    for i, block in enumerate(net.extras):
        for name, idx in (("conv1", 0), ("bn1", 1), ("conv2", 3), ("bn2", 4)):
            yield f"extras.{i}.{name}", block[idx]
    for part in ("loc", "conf"):
        for i, head in enumerate(getattr(net, part)):
            yield f"{part}.{i}", head


_BN_NAMES = {"gamma": "weight", "beta": "bias", "running_mean": "running_mean", "running_var": "running_var"}


def _params(layer: Any) -> dict[str, Any]:
    """A layer's parameters by torch suffix (Gluon's are named <prefix>_gamma, <prefix>_weight, ...)."""
    out = {}
    for full, p in layer.params.items():
        suffix = next((s for s in _BN_NAMES if full.endswith("_" + s)), full.rsplit("_", 1)[-1])
        out[_BN_NAMES.get(suffix, suffix)] = p
    return out


def export_weights(net: SSD300) -> dict[str, np.ndarray]:
    return {
        f"{name}.{k}": p.data().asnumpy()
        for name, layer in named_layers(net)
        for k, p in _params(layer).items()
    }


def load_weights(net: SSD300, weights: dict[str, np.ndarray]) -> None:
    for name, layer in named_layers(net):
        for k, p in _params(layer).items():
            p.set_data(mx.nd.array(weights[f"{name}.{k}"], dtype=p.dtype))


class DetectionMXNet(MXNetFamily):
    """SSD300 v1.1 (DLE's network, multibox loss, decoding + NMS, COCO fed by DALI), in MXNet."""

    build_model = staticmethod(build_model)
    initialize = staticmethod(initialize)
    infer = staticmethod(infer)
    export_weights = staticmethod(export_weights)
    load_weights = staticmethod(load_weights)

    def loss(self, spec: TaskSpec) -> Any:
        """DLE's multibox loss (localization + confidence with hard negative mining)."""
        return SSDLoss()

    def dali_source(self, bench: Any) -> Any:
        """COCO through DLE's SSD300 input pipeline (boxes encoded to the default boxes by DALI)."""
        from dlbench.backends.mxnet.dali_source import CocoSource

        return CocoSource(bench.job, bench.ctx, bench.prec.plan.input_dtype)
