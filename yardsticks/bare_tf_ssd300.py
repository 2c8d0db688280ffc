"""TensorFlow yardstick for SSD300: the detection training loop a careful Keras user writes by hand.

SSD300 v1.1 as NVIDIA DeepLearningExamples define it, in plain Keras 3 (NHWC): ResNet-50 v1.5 (the
classification yardstick's blocks) cut after conv4_x with conv4_x's stride 1 (38x38 at 300x300), five
extra blocks with BatchNorm, six 3x3 heads; the head maps are permuted to NCHW before the reshape, so loc
(B, 4, 8732) and conf (B, 81, 8732) list the default boxes in DLE's order: 22,894,902 trainable parameters.
(Below 300x300, for CPU runs, the last two extra convs are padded once their map is under 3 wide, so every
layer and parameter stays.)

One synthetic batch made once and kept on the device: images, and targets already encoded to offsets from
the default boxes (1..8 random objects per image; each default box takes its best object at IoU > 0.5 and
each object its best box, as DALI's box_encoder does), so no input cost is timed. Training step: forward,
DLE's multibox loss in float32 (Smooth-L1 on positives + cross-entropy on positives and the 3x hardest
negatives, ranked with a double argsort), backward, SGD lr 2.6e-3, momentum 0.9, weight decay 5e-4 (Keras'
decoupled-into-the-update weight decay on every variable, as dlbench's TF optimizer has it); one
tf.function call per step (XLA with --xla). Inference is `model(images)` (the forward pass, as DLE times
it). Prints one `BARE {json}` line per (precision, mode); units are images.

Usage: python yardsticks/bare_tf_ssd300.py [--batch 128] [--xla] [--precision amp,bf16,fp32,tf32]
       [--mode train,infer] [--warmup 20] [--steps 20] [--windows 8] [--device auto|cuda|cpu]
       [--image-size 300] [--num-classes 81] [--lr 2.6e-3] [--weight-decay 5e-4]
"""

from __future__ import annotations

import argparse
import math
import sys

import bare_tf_common as common
import keras
import numpy as np
import tensorflow as tf
from bare_data import default_boxes, encoded_targets, ssd300_flags
from bare_tf_classification import bn, bottleneck, conv
from keras import layers

FEATURE_CHANNELS = (1024, 512, 512, 256, 256, 256)
EXTRA_MID = (256, 256, 128, 128, 128)
PER_CELL = (4, 6, 6, 6, 4, 4)  # default boxes per cell on the 38, 19, 10, 5, 3, 1 maps
XAVIER = keras.initializers.GlorotUniform  # a factory: a fresh initializer per layer


def extra_block(x, mid: int, cout: int, downsample: bool):
    x = layers.ReLU()(bn(conv(x, mid, 1, init=XAVIER)))
    if downsample:
        x = conv(x, cout, 3, 2, init=XAVIER)
    else:  # DLE's unpadded 3x3 (5 -> 3 -> 1); padded when the map is under 3 wide (small CPU inputs)
        padding = "valid" if x.shape[1] >= 3 else "same"
        x = layers.Conv2D(cout, 3, padding=padding, use_bias=False, kernel_initializer=XAVIER())(x)
    return layers.ReLU()(bn(x))


def head(x, channels: int, rows: int):
    bound = 1.0 / math.sqrt(x.shape[-1] * 9)  # torch's conv bias init
    y = layers.Conv2D(
        channels, 3, padding="same", kernel_initializer=XAVIER(),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound),
    )(x)  # fmt: skip
    return layers.Reshape((rows, -1))(layers.Permute((3, 1, 2))(y))  # NCHW order, as torch reshapes


def ssd300(size: int = 300, classes: int = 81) -> keras.Model:
    images = keras.Input((size, size, 3), dtype="float32")
    x = layers.ReLU()(bn(conv(images, 64, 7, 2)))
    x = layers.MaxPooling2D(3, 2)(layers.ZeroPadding2D(1)(x))
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 1)):
        for i in range(blocks):
            x = bottleneck(x, width, stride if i == 0 else 1)
    feats = [x]
    for i, mid in enumerate(EXTRA_MID):
        x = extra_block(x, mid, FEATURE_CHANNELS[i + 1], downsample=i < 3)
        feats.append(x)
    loc = layers.Concatenate(axis=2)([head(f, n * 4, 4) for f, n in zip(feats, PER_CELL, strict=True)])
    conf = layers.Concatenate(axis=2)(
        [head(f, n * classes, classes) for f, n in zip(feats, PER_CELL, strict=True)]
    )
    model = keras.Model(
        images, [layers.Activation("linear", dtype="float32")(t) for t in (loc, conf)], name="ssd300"
    )
    model.feature_sizes = [int(f.shape[1]) for f in feats]
    return model


def multibox_loss(ploc, pconf, gloc, glabel):
    """DLE's multibox loss on pre-encoded offsets, in float32: Smooth-L1 on positive boxes + cross-entropy on
    positives and the 3x as many hardest negatives, per image divided by its positives, batch mean."""
    ploc, pconf = tf.cast(ploc, tf.float32), tf.cast(pconf, tf.float32)
    glabel = tf.cast(glabel, tf.int64)  # int32 comparisons stay in host memory on a GPU, outside XLA
    mask = glabel > 0
    maskf = tf.cast(mask, tf.float32)
    pos_num = tf.reduce_sum(maskf, 1)
    diff = tf.abs(ploc - gloc)
    sl1 = tf.reduce_sum(maskf * tf.reduce_sum(tf.where(diff < 1.0, 0.5 * diff * diff, diff - 0.5), 1), 1)
    con = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=glabel, logits=tf.transpose(pconf, (0, 2, 1)))
    con_neg = tf.where(mask, tf.zeros_like(con), tf.stop_gradient(con))
    order = tf.argsort(con_neg, axis=1, direction="DESCENDING")
    rank = tf.argsort(tf.cast(order, tf.float32), axis=1)  # as float32 (exact): int32 would sort on the host
    neg_num = tf.minimum(3.0 * pos_num, tf.cast(tf.shape(mask)[1], tf.float32))[:, None]
    chosen = tf.logical_or(mask, tf.cast(rank, tf.float32) < neg_num)
    closs = tf.reduce_sum(con * tf.cast(chosen, tf.float32), 1)
    return tf.reduce_mean((sl1 + closs) * tf.cast(pos_num > 0, tf.float32) / tf.maximum(pos_num, 1e-6))


def run(a: argparse.Namespace) -> int:
    prec = common.setup(a)
    a.batch = a.batch or (128 if prec.device == "cuda" else 2)
    rng = np.random.default_rng(a.seed)
    with prec.scope():
        model = ssd300(a.image_size, a.num_classes)
        dboxes = default_boxes(model.feature_sizes, a.image_size)
        x = common.on_device(rng.standard_normal((a.batch, a.image_size, a.image_size, 3), np.float32))
        gloc_np, glabel_np = encoded_targets(a.batch, dboxes, a.num_classes, rng)
        gloc, glabel = common.on_device(gloc_np), common.on_device(glabel_np)
        if a.mode == "train":

            def loss_of(m, images, gloc, glabel):
                ploc, pconf = m(images, training=True)
                return multibox_loss(ploc, pconf, gloc, glabel)

            opt = keras.optimizers.SGD(learning_rate=a.lr, momentum=0.9, weight_decay=a.weight_decay or None)
            opt = common.build_optimizer(opt, model, prec)
            fn = common.function(common.train_step(model, opt, loss_of, prec), a)

            def step():
                return a.batch, fn(x, gloc, glabel)
        else:
            fn = common.function(lambda images: model(images, training=False), a)

            def step():
                fn(x)
                return a.batch, None

    rates, loss = common.measure(step, a, prec)
    return common.report(
        a, prec, rates, loss, model="ssd300", params=common.param_count(model), unit="img/s", optimizer="sgd",
        default_boxes=len(dboxes), positives_per_image=float((glabel_np > 0).sum(1).mean()),
    )  # fmt: skip


def main() -> int:
    p = common.parser(__doc__, warmup=20, steps=20, windows=8)
    ssd300_flags(p)
    return common.run_all(p, run)


if __name__ == "__main__":
    sys.exit(main())
