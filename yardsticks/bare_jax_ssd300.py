"""JAX yardstick for SSD300: the detection training loop a careful Flax + Optax user writes by hand.

SSD300 v1.1 as NVIDIA DeepLearningExamples define it, in plain Flax linen (NHWC), as dlbench's Flax model:
ResNet-50 v1.5 (the classification yardstick's blocks: torchvision's symmetric padding, BatchNorm eps 1e-5 /
momentum 0.9) cut after conv4_x with conv4_x's stride 1 (38x38 at 300x300), five extra blocks with
BatchNorm, six 3x3 heads; the head maps are moved to NCHW before the reshape, so loc (B, 4, 8732) and conf
(B, 81, 8732) list the default boxes in DLE's order: 22,894,902 trainable parameters. Initialisation as
torch: He (fan_out) for the backbone, Glorot-uniform for extras and heads, head biases U(+-1/sqrt(fan_in)).
(Below 300x300, for CPU runs, the last two extra convs are padded once their map is under 3 wide, so every
layer and parameter stays.)

One synthetic batch made once and kept on the device: float32 images (the first conv casts), and targets
already encoded to offsets from the default boxes (1..8 random objects per image; each default box takes its
best object at IoU > 0.5 and each object its best box, as DALI's box_encoder does), so no input cost is
timed. Training step: forward, DLE's multibox loss in float32 (Smooth-L1 on positives + cross-entropy on
positives and the 3x hardest negatives, ranked with a double argsort), backward, SGD lr 2.6e-3, momentum 0.9,
weight decay 5e-4 added to the gradient before momentum on every parameter (torch's L2 form, as dlbench's
Optax optimizer has it); one hand-written `jax.jit` step with its state donated. Inference is the forward
pass to (loc, conf) (as DLE times it; no box decoding or NMS). Prints one `BARE {json}` line per (precision,
mode); units are images.

Usage: python yardsticks/bare_jax_ssd300.py [--batch 128] [--no-jit] [--precision amp,bf16,fp32,tf32]
       [--mode train,infer] [--warmup 20] [--steps 20] [--windows 8] [--device auto|cuda|cpu]
       [--image-size 300] [--num-classes 81] [--lr 2.6e-3] [--weight-decay 5e-4]
"""

from __future__ import annotations

import argparse
import math
import sys

import bare_jax_common as common
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from bare_data import default_boxes, encoded_targets, ssd300_flags
from bare_jax_classification import Bottleneck, Net

FEATURE_CHANNELS = (1024, 512, 512, 256, 256, 256)
EXTRA_MID = (256, 256, 128, 128, 128)
PER_CELL = (4, 6, 6, 6, 4, 4)  # default boxes per cell on the 38, 19, 10, 5, 3, 1 maps
XAVIER = nn.initializers.glorot_uniform()


def uniform(bound: float):
    return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -bound, bound)


class SSD300(Net):
    classes: int = 81

    def xavier_conv(self, features: int, kernel: int, stride: int, pad: int, bias_bound: float | None = None):
        return nn.Conv(
            features, (kernel, kernel), (stride, stride), padding=((pad, pad), (pad, pad)),
            use_bias=bias_bound is not None, kernel_init=XAVIER,
            bias_init=uniform(bias_bound) if bias_bound is not None else nn.initializers.zeros, dtype=self.dtype,
        )  # fmt: skip

    def extra(self, x, i: int, train: bool):
        """1x1 conv, BN, ReLU, 3x3 conv (stride 2 for the first three; then DLE's unpadded 5 -> 3 -> 1,
        padded when the map is under 3 wide), BN, ReLU."""
        x = nn.relu(self.bn(train)(self.xavier_conv(EXTRA_MID[i], 1, 1, 0)(x)))
        stride, pad = (2, 1) if i < 3 else (1, 0 if x.shape[1] >= 3 else 1)
        return nn.relu(self.bn(train)(self.xavier_conv(FEATURE_CHANNELS[i + 1], 3, stride, pad)(x)))

    def head(self, x, channels: int, rows: int):
        bound = 1.0 / math.sqrt(x.shape[-1] * 9)  # torch's conv bias init
        y = self.xavier_conv(channels, 3, 1, 1, bias_bound=bound)(x)
        return jnp.transpose(y, (0, 3, 1, 2)).reshape(y.shape[0], rows, -1)  # NCHW order, as torch reshapes

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.relu(self.bn(train)(self.conv(64, 7, 2)(x)))
        x = nn.max_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)))
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 1)):
            for i in range(blocks):
                x = Bottleneck(self.dtype, width, stride if i == 0 else 1)(x, train)
        feats = [x]
        for i in range(len(EXTRA_MID)):
            x = self.extra(x, i, train)
            feats.append(x)
        pairs = list(zip(feats, PER_CELL, strict=True))
        loc = jnp.concatenate([self.head(f, n * 4, 4) for f, n in pairs], axis=2)
        conf = jnp.concatenate([self.head(f, n * self.classes, self.classes) for f, n in pairs], axis=2)
        return loc.astype(jnp.float32), conf.astype(jnp.float32)


def feature_sizes(size: int) -> list[int]:
    """Sides of the six maps the heads see: (38, 19, 10, 5, 3, 1) at 300 (each stride 2 halves, rounding up)."""
    half = lambda s: (s - 1) // 2 + 1  # noqa: E731
    f = half(half(half(size)))  # stem conv, max-pool, conv3_x (conv4_x keeps stride 1)
    sizes = [f]
    for _ in range(3):
        f = half(f)
        sizes.append(f)
    for _ in range(2):
        f = f - 2 if f >= 3 else f
        sizes.append(f)
    return sizes


def multibox_loss(ploc, pconf, gloc, glabel):
    """DLE's multibox loss on pre-encoded offsets, in float32: Smooth-L1 on positive boxes + cross-entropy on
    positives and the 3x as many hardest negatives, per image divided by its positives, batch mean."""
    mask = glabel > 0
    maskf = mask.astype(jnp.float32)
    pos_num = maskf.sum(1)
    diff = jnp.abs(ploc - gloc)
    sl1 = (maskf * jnp.where(diff < 1.0, 0.5 * diff * diff, diff - 0.5).sum(1)).sum(1)
    con = -jnp.take_along_axis(jax.nn.log_softmax(pconf, axis=1), glabel[:, None, :], axis=1)[:, 0]
    con_neg = jnp.where(mask, 0.0, jax.lax.stop_gradient(con))
    rank = jnp.argsort(jnp.argsort(con_neg, axis=1, descending=True), axis=1)
    neg_num = jnp.minimum(3.0 * pos_num, mask.shape[1])[:, None]
    closs = (con * (mask | (rank < neg_num)).astype(jnp.float32)).sum(1)
    return ((sl1 + closs) * (pos_num > 0).astype(jnp.float32) / jnp.maximum(pos_num, 1e-6)).mean()


def run(a: argparse.Namespace) -> int:
    prec = common.setup(a)
    a.batch = a.batch or (128 if prec.device == "cuda" else 2)
    rng = np.random.default_rng(a.seed)
    model = SSD300(prec.dtype, a.num_classes)
    dboxes = default_boxes(feature_sizes(a.image_size), a.image_size)
    x = jax.device_put(rng.standard_normal((a.batch, a.image_size, a.image_size, 3), np.float32))
    gloc_np, glabel_np = encoded_targets(a.batch, dboxes, a.num_classes, rng)
    gloc, glabel = jax.device_put(gloc_np), jax.device_put(glabel_np)
    # XLA's RngBitGenerator (as dlbench's JAX worker): the initialisers compile far faster than threefry's
    variables = jax.jit(lambda k: model.init(k, x[:1]))(jax.random.key(a.seed, impl="rbg"))
    params, stats = variables["params"], variables["batch_stats"]
    anchors = jax.eval_shape(lambda: model.apply(variables, x[:1]))[0].shape[2]
    assert anchors == len(dboxes), f"the heads emit {anchors} boxes, the default boxes are {len(dboxes)}"
    if a.mode == "train":

        def apply_loss(p, s, key, images, gloc, glabel):
            (ploc, pconf), new = model.apply(
                {"params": p, "batch_stats": s}, images, train=True, mutable=["batch_stats"]
            )
            return multibox_loss(ploc, pconf, gloc, glabel), new["batch_stats"]

        tx = optax.chain(optax.add_decayed_weights(a.weight_decay), optax.sgd(a.lr, momentum=0.9))
        fn = common.jit(common.train_step(apply_loss, tx, prec), a, donate=(0,))
        state = jax.device_put((params, stats, tx.init(params), common.loss_scale(prec), common.step_key(a)))

        def step():
            nonlocal state
            state, loss = fn(state, x, gloc, glabel)
            return a.batch, loss
    else:
        fn = common.jit(lambda v, images: model.apply(v, images, train=False), a)

        def step():
            return a.batch, fn(variables, x)

    rates, out = common.measure(step, a)
    return common.report(
        a, prec, rates, out if a.mode == "train" else None, model="ssd300", params=common.param_count(params),
        unit="img/s", optimizer="optax", default_boxes=len(dboxes),
        positives_per_image=float((glabel_np > 0).sum(1).mean()),
    )  # fmt: skip


def main() -> int:
    p = common.parser(__doc__, warmup=20, steps=20, windows=8)
    ssd300_flags(p)
    return common.run_all(p, run)


if __name__ == "__main__":
    sys.exit(main())
