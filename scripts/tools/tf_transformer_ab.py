#!/usr/bin/env python
"""Is dlbench's TensorFlow Transformer as fast to train as the hand-written one? Both networks in one
process, each in the same plain training step (tape, loss scaling, optimizer.apply in one tf.function),
timed in alternating rounds, so that machine drift between commands cannot make the difference.

    python scripts/tools/tf_transformer_ab.py [--sentences 640] [--length 64] [--rounds 6] [--steps 10]
        [--size base] [--xla] [--device gpu|cpu] [--variants Y,D,DY,YD]

  Y   the yardstick's network and loss (yardsticks/bare_tf_transformer.py) with its Adam and schedule
  D   dlbench's network (called as the bench calls it: family.call_model) with dlbench's loss and optimizer
  DY  dlbench's network with the yardstick's loss and optimizer
  YD  the yardstick's network with dlbench's loss

One `ROUND {json}` line per round (target tokens/s per variant; the order flips every round) and one
`AB {json}` line: the medians and each variant's ratio to Y. Data: the yardstick's synthetic sentence pairs,
every sentence --length tokens, four batches on the device, cycled. AMP: mixed_float16 with dynamic loss
scaling on a GPU, mixed_bfloat16 without scaling on the CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "yardsticks"), str(ROOT / "src")]

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

VARIANTS = ("Y", "D", "DY", "YD")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sentences", type=int, default=640)
    p.add_argument("--length", type=int, default=64, help="tokens per sentence, source and target")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=10, help="steps per round and variant")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps per variant first")
    p.add_argument("--size", default="base", help="a dlbench Transformer size (base, tiny, ...)")
    p.add_argument("--xla", action="store_true", help="tf.function(jit_compile=True); else graph mode")
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--variants", default=",".join(VARIANTS))
    a = p.parse_args(argv)
    a.variants = a.variants.split(",")
    if unknown := sorted(set(a.variants) - set(VARIANTS)):
        p.error(f"--variants: unknown {unknown}; choose from {','.join(VARIANTS)}")
    return a


def variants(cfg: Any) -> dict[str, tuple[Callable, Callable, Callable]]:
    """Name -> (make the network, loss(model, src, tgt_in, labels), make the optimizer). dlbench's parts are
    the ones its TF bench builds for `cfg` (a TranslationConfig): the family's build_model, the workload
    spec's optimizer through make_optimizer, the family's loss."""
    import bare_tf_transformer as bare

    from dlbench.backends.tensorflow.family import call_model
    from dlbench.backends.tensorflow.optimizers import make_optimizer
    from dlbench.workloads.translation import tensorflow as mine
    from dlbench.workloads.translation.spec import model_size, spec

    size = model_size(cfg)

    def bare_net() -> keras.Model:  # the yardstick's own build (one layer count for encoder and decoder)
        return bare.build(
            argparse.Namespace(
                vocab=size.vocab, d_model=size.d_model, heads=size.heads, d_ff=size.ffn,
                layers=size.encoder_layers, dropout=size.dropout, decode_len=0,
            )
        )  # fmt: skip

    def my_net() -> keras.Model:
        return mine.build_model(cfg)

    def bare_opt() -> keras.optimizers.Optimizer:
        return keras.optimizers.Adam(
            bare.Noam(size.d_model, cfg.warmup), beta_1=0.9, beta_2=0.98, epsilon=1e-9
        )

    def my_opt() -> keras.optimizers.Optimizer:
        return make_optimizer(spec(cfg).optimizer)

    def bare_loss(m, s, t, y):
        return bare.label_smoothed_ce(m((s, t), training=True, masked=True), y)

    def my_loss(m, s, t, y):
        return mine.label_smoothed_ce(call_model(m, (s, t), True), y)

    def my_net_bare_loss(m, s, t, y):
        return bare.label_smoothed_ce(call_model(m, (s, t), True), y)

    def bare_net_my_loss(m, s, t, y):
        return mine.label_smoothed_ce(m((s, t), training=True, masked=True), y)

    return {
        "Y": (bare_net, bare_loss, bare_opt),
        "D": (my_net, my_loss, my_opt),
        "DY": (my_net, my_net_bare_loss, bare_opt),
        "YD": (bare_net, bare_net_my_loss, bare_opt),
    }


def train_step(model: keras.Model, opt: keras.optimizers.Optimizer, loss_of: Callable, scaled: bool):
    """The plain Keras 3 custom step, as both the bench and the yardstick run it."""
    weights = model.trainable_variables

    def step(src, tgt_in, labels):
        with tf.GradientTape() as tape:
            loss = loss_of(model, src, tgt_in, labels)
            target = opt.scale_loss(loss) if scaled else loss
        opt.apply(tape.gradient(target, weights), weights)
        return loss

    return step


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    from bare_data import PAD, sentence_pairs

    from dlbench.workloads.translation.spec import TranslationConfig
    from dlbench.workloads.translation.transformer import SIZES

    if a.size not in SIZES:
        sys.exit(f"--size {a.size}: not a Transformer size; choose from {', '.join(SIZES)}")
    cfg = TranslationConfig(size=a.size, vocab=SIZES[a.size].vocab)  # the size's own vocabulary
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if a.device == "gpu" and not gpus:
        sys.exit("--device gpu: TensorFlow sees no GPU here; use --device cpu")
    on_gpu = a.device == "gpu"
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("mixed_float16" if on_gpu else "mixed_bfloat16")
    flags = argparse.Namespace(vocab=cfg.vocab, max_len=a.length, min_len=a.length)
    rng = np.random.default_rng(0)
    with tf.device("/GPU:0" if on_gpu else "/CPU:0"):
        pool = [
            tuple(tf.identity(tf.constant(x)) for x in sentence_pairs(a.sentences, flags, rng))
            for _ in range(4)
        ]
        tokens = int(np.sum(pool[0][2].numpy() != PAD))
        steps, parts = {}, variants(cfg)
        for name in a.variants:
            make_net, loss_of, make_opt = parts[name]
            model, opt = make_net(), make_opt()
            opt = keras.optimizers.LossScaleOptimizer(opt) if on_gpu else opt
            opt.build(model.trainable_variables)
            steps[name] = tf.function(train_step(model, opt, loss_of, on_gpu), jit_compile=a.xla)
        calls = 0
        for name in a.variants:
            for _ in range(a.warmup):
                steps[name](*pool[calls % 4])
                calls += 1
        tf.test.experimental.sync_devices()
        rates: dict[str, list[float]] = {name: [] for name in a.variants}
        for r in range(a.rounds):
            for name in a.variants if r % 2 == 0 else a.variants[::-1]:
                start = time.perf_counter()
                for _ in range(a.steps):
                    steps[name](*pool[calls % 4])
                    calls += 1
                tf.test.experimental.sync_devices()
                rates[name].append(tokens * a.steps / (time.perf_counter() - start))
            print(
                "ROUND " + json.dumps({"round": r, **{k: round(v[-1], 1) for k, v in rates.items()}}),
                flush=True,
            )
    median = {k: statistics.median(v) for k, v in rates.items()}
    ratio = {k: v / median["Y"] for k, v in median.items()} if "Y" in median else None
    facts = {"xla": a.xla, "device": a.device, "size": a.size, "sentences": a.sentences, "length": a.length}
    print(
        "AB "
        + json.dumps(
            {**facts, "target_tokens": tokens, "median": median, "ratio_to_Y": ratio, "rates": rates}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
