"""TensorFlow yardstick for image classification: ResNet-50 v1.5 or VGG16 (configuration D) in plain Keras 3,
NHWC, one synthetic batch made once and kept on the device, softmax cross-entropy, SGD lr 0.01 momentum 0.9,
a hand-written tf.function step (XLA with --xla). Prints one `BARE {json}` line per (precision, mode); units
are images.

The networks are torchvision's (as dlbench's TF models are): bias-free convs with PyTorch's symmetric
padding (explicit zero padding before every strided padded layer), BatchNorm eps 1e-5 / momentum 0.9, the
stride on the bottleneck's 3x3 conv (v1.5), VGG16's 7x7 adaptive average pool before its classifier when the
feature map is not already 7x7, and the logits cast to float32 for the loss (Keras' mixed-precision advice).
ResNet-50 has 25,557,032 trainable parameters and VGG16 138,357,544 at 224x224 and 1000 classes.

Usage: python yardsticks/bare_tf_classification.py [--model resnet50|vgg16] [--batch 256] [--xla]
       [--precision amp,bf16,fp32,tf32] [--mode train,infer] [--warmup 20] [--steps 50] [--windows 5]
       [--image-size 224] [--num-classes 1000] [--device auto|cuda|cpu]
"""

from __future__ import annotations

import argparse
import sys

import bare_tf_common as common
import keras
import numpy as np
import tensorflow as tf
from keras import layers


def he() -> keras.initializers.Initializer:
    """A fresh initializer per layer: a shared Keras 3 instance gives layers of one shape the same weights."""
    return keras.initializers.VarianceScaling(2.0, mode="fan_out", distribution="untruncated_normal")


def conv(x, filters: int, kernel: int, stride: int = 1, init=he):
    """Conv with torch's padding: kernel // 2 on every side (explicit when strided, where TF's "same"
    would pad the bottom/right more)."""
    pad = kernel // 2
    if stride > 1 and pad:
        x = layers.ZeroPadding2D(pad)(x)
    padding = "valid" if (stride > 1 and pad) or not pad else "same"
    return layers.Conv2D(filters, kernel, stride, padding, use_bias=False, kernel_initializer=init())(x)


def bn(x):
    return layers.BatchNormalization(epsilon=1e-5, momentum=0.9)(x)


def bottleneck(x, width: int, stride: int):
    shortcut = x
    if stride != 1 or x.shape[-1] != 4 * width:
        shortcut = bn(layers.Conv2D(4 * width, 1, stride, use_bias=False, kernel_initializer=he())(x))
    y = layers.ReLU()(bn(conv(x, width, 1)))
    y = layers.ReLU()(bn(conv(y, width, 3, stride)))
    y = bn(conv(y, 4 * width, 1))
    return layers.ReLU()(layers.Add()([y, shortcut]))


def resnet50(size: int, classes: int) -> keras.Model:
    images = keras.Input((size, size, 3), dtype="float32")
    x = layers.ReLU()(bn(conv(images, 64, 7, 2)))
    x = layers.MaxPooling2D(3, 2)(layers.ZeroPadding2D(1)(x))
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for i in range(blocks):
            x = bottleneck(x, width, 2 if stage and not i else 1)
    torch_default = keras.initializers.VarianceScaling(1 / 3, mode="fan_in", distribution="uniform")
    x = layers.Dense(classes, kernel_initializer=torch_default)(layers.GlobalAveragePooling2D()(x))
    return keras.Model(images, layers.Activation("linear", dtype="float32")(x))


class AdaptiveAvgPool(layers.Layer):
    """torch's AdaptiveAvgPool2d(n) for a static NHWC map: averaging matrices from torch's bin rule."""

    def __init__(self, n: int, **kw) -> None:
        super().__init__(**kw)
        self.n = n

    def _m(self, size: int) -> np.ndarray:
        m = np.zeros((self.n, size), np.float32)
        for i in range(self.n):
            lo, hi = i * size // self.n, -(-(i + 1) * size // self.n)
            m[i, lo:hi] = 1.0 / (hi - lo)
        return m

    def call(self, x):
        ph = tf.constant(self._m(x.shape[1]), dtype=x.dtype)
        pw = tf.constant(self._m(x.shape[2]), dtype=x.dtype)
        return tf.einsum("ih,jw,nhwc->nijc", ph, pw, x)

    def compute_output_shape(self, s):
        return (s[0], self.n, self.n, s[3])


def vgg16(size: int, classes: int) -> keras.Model:
    images = keras.Input((size, size, 3), dtype="float32")
    x = images
    for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"):
        if v == "M":
            x = layers.MaxPooling2D(2, 2)(x)
        else:
            x = layers.Conv2D(v, 3, padding="same", activation="relu", kernel_initializer=he())(x)
    if x.shape[1] != 7 or x.shape[2] != 7:
        x = AdaptiveAvgPool(7)(x)
    x = layers.Flatten()(x)

    def init():
        return keras.initializers.RandomNormal(stddev=0.01)

    for _ in range(2):
        x = layers.Dropout(0.5)(layers.Dense(4096, activation="relu", kernel_initializer=init())(x))
    x = layers.Dense(classes, kernel_initializer=init())(x)
    return keras.Model(images, layers.Activation("linear", dtype="float32")(x))


MODELS = {"resnet50": resnet50, "vgg16": vgg16}


def build(a: argparse.Namespace) -> keras.Model:
    return MODELS[a.model](a.image_size, a.num_classes)


def run(a: argparse.Namespace) -> int:
    prec = common.setup(a)
    rng = np.random.default_rng(a.seed)
    with prec.scope():
        model = build(a)
        x = common.on_device(rng.standard_normal((a.batch, a.image_size, a.image_size, 3), np.float32))
        y = common.on_device(rng.integers(0, a.num_classes, a.batch), tf.int64)
        if a.mode == "train":

            def loss_of(m, images, labels):
                logits = m(images, training=True)
                ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
                return tf.reduce_mean(ce)

            opt = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
            opt = common.build_optimizer(opt, model, prec)
            fn = common.function(common.train_step(model, opt, loss_of, prec), a)

            def step():
                return a.batch, fn(x, y)
        else:
            fn = common.function(lambda images: model(images, training=False), a)

            def step():
                fn(x)
                return a.batch, None

    rates, loss = common.measure(step, a, prec)
    return common.report(
        a, prec, rates, loss, params=common.param_count(model), unit="img/s", optimizer="sgd"
    )


def main() -> int:
    p = common.parser(__doc__, warmup=20, steps=50, windows=5)
    p.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    return common.run_all(p, run)


if __name__ == "__main__":
    sys.exit(main())
