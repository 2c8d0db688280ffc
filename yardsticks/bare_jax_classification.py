"""JAX yardstick for image classification: ResNet-50 v1.5 or VGG16 (configuration D) in plain Flax linen +
Optax, NHWC, one synthetic batch made once and kept on the device, softmax cross-entropy, SGD lr 0.01
momentum 0.9, a hand-written `jax.jit` step with its state donated. Prints one `BARE {json}` line per
(precision, mode); units are images.

The networks are torchvision's (as dlbench's Flax models are): bias-free convs with PyTorch's symmetric
padding, BatchNorm eps 1e-5 / momentum 0.9 (statistics in float32), the stride on the bottleneck's 3x3 conv
(v1.5); VGG16 without batch norm, its 7x7 adaptive average pool before the classifier when the feature map
is not already 7x7, the pooled map flattened in torch's (C, H, W) order as dlbench's is, and Dropout 0.5
in training; the logits cast to float32 for the loss. ResNet-50 has 25,557,032 trainable parameters and
VGG16 138,357,544 at 224x224 and 1000 classes.

Usage: python yardsticks/bare_jax_classification.py [--model resnet50|vgg16] [--batch 256] [--no-jit]
       [--precision amp,bf16,fp32,tf32] [--mode train,infer] [--warmup 20] [--steps 50] [--windows 5]
       [--image-size 224] [--num-classes 1000] [--device auto|cuda|cpu]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import bare_jax_common as common
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

HE = nn.initializers.variance_scaling(2.0, "fan_out", "normal")


class Net(nn.Module):
    dtype: Any = jnp.float32

    def conv(self, features: int, kernel: int, stride: int = 1):
        pad = kernel // 2
        return nn.Conv(features, (kernel, kernel), (stride, stride), padding=((pad, pad), (pad, pad)),
                       use_bias=False, kernel_init=HE, dtype=self.dtype)  # fmt: skip

    def bn(self, train: bool):
        return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5, dtype=self.dtype)


class Bottleneck(Net):
    width: int = 64
    stride: int = 1

    @nn.compact
    def __call__(self, x, train: bool):
        shortcut = x
        if self.stride != 1 or x.shape[-1] != 4 * self.width:
            shortcut = self.bn(train)(self.conv(4 * self.width, 1, self.stride)(x))
        y = nn.relu(self.bn(train)(self.conv(self.width, 1)(x)))
        y = nn.relu(self.bn(train)(self.conv(self.width, 3, self.stride)(y)))
        y = self.bn(train)(self.conv(4 * self.width, 1)(y))
        return nn.relu(y + shortcut)


class ResNet50(Net):
    classes: int = 1000

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.relu(self.bn(train)(self.conv(64, 7, 2)(x)))
        x = nn.max_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)))
        for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
            for i in range(blocks):
                x = Bottleneck(self.dtype, width, 2 if stage and not i else 1)(x, train)
        torch_default = nn.initializers.variance_scaling(1 / 3, "fan_in", "uniform")
        x = nn.Dense(self.classes, kernel_init=torch_default, dtype=self.dtype)(x.mean(axis=(1, 2)))
        return x.astype(jnp.float32)


VGG16_D = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def adaptive_avg_pool(x, n: int):
    """torch's AdaptiveAvgPool2d(n) on a static NHWC map (bins from floor(i*size/n) to ceil((i+1)*size/n)) as
    two averaging matrices; the identity when the map is already n x n (VGG16 at 224x224)."""
    if x.shape[1:3] == (n, n):
        return x

    def bins(size: int) -> np.ndarray:
        m = np.zeros((n, size), np.float32)
        for i in range(n):
            lo, hi = i * size // n, -(-(i + 1) * size // n)
            m[i, lo:hi] = 1.0 / (hi - lo)
        return m

    ph, pw = (jnp.asarray(bins(s), x.dtype) for s in x.shape[1:3])
    return jnp.einsum("ih,jw,nhwc->nijc", ph, pw, x)


class VGG16(Net):
    classes: int = 1000

    @nn.compact
    def __call__(self, x, train: bool = False):
        for v in VGG16_D:
            if v == "M":
                x = nn.max_pool(x, (2, 2), (2, 2))
            else:
                x = nn.relu(nn.Conv(v, (3, 3), padding=((1, 1), (1, 1)), kernel_init=HE, dtype=self.dtype)(x))
        x = adaptive_avg_pool(x, 7)
        x = jnp.transpose(x, (0, 3, 1, 2)).reshape(x.shape[0], -1)  # torch's flatten order, as dlbench's
        normal = nn.initializers.normal(0.01)  # torchvision's VGG classifier init (biases zero)
        for _ in range(2):
            x = nn.relu(nn.Dense(4096, kernel_init=normal, dtype=self.dtype)(x))
            x = nn.Dropout(0.5, deterministic=not train)(x)
        x = nn.Dense(self.classes, kernel_init=normal, dtype=self.dtype)(x)
        return x.astype(jnp.float32)


MODELS = {"resnet50": ResNet50, "vgg16": VGG16}


def run(a: argparse.Namespace) -> int:
    prec = common.setup(a)
    rng = np.random.default_rng(a.seed)
    model = MODELS[a.model](prec.dtype, a.num_classes)
    x = jax.device_put(rng.standard_normal((a.batch, a.image_size, a.image_size, 3), np.float32))
    y = jax.device_put(rng.integers(0, a.num_classes, a.batch).astype(np.int32))
    variables = jax.jit(lambda k: model.init(k, x[:1]))(jax.random.key(a.seed))
    params, stats = variables["params"], variables.get("batch_stats", {})  # VGG16 has none
    if a.mode == "train":

        def apply_loss(p, s, key, images, labels):
            v, rngs = {"params": p, "batch_stats": s}, {"dropout": key}  # VGG16's dropout
            logits, new = model.apply(v, images, train=True, mutable=["batch_stats"], rngs=rngs)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
            return loss, new.get("batch_stats", {})

        tx = optax.sgd(0.01, momentum=0.9)
        fn = common.jit(common.train_step(apply_loss, tx, prec), a, donate=(0,))
        state = jax.device_put((params, stats, tx.init(params), common.loss_scale(prec), common.step_key(a)))

        def step():
            nonlocal state
            state, loss = fn(state, x, y)
            return a.batch, loss
    else:
        fn = common.jit(lambda v, images: model.apply(v, images, train=False), a)

        def step():
            return a.batch, fn(variables, x)

    rates, out = common.measure(step, a)
    loss = out if a.mode == "train" else None
    return common.report(
        a,
        prec,
        rates,
        loss,
        model=a.model,
        params=common.param_count(params),
        unit="img/s",
        optimizer="optax",
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
