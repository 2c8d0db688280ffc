"""TensorFlow yardstick for the Transformer: the translation training loop and greedy decoder a careful Keras
user writes by hand, no harness around them.

Transformer-base (Vaswani et al. 2017) in plain Keras 3: post-norm, d_model 512, 8 heads, FFN 2048, 6 + 6
layers, dropout 0.1, sinusoidal positions, one 32,000-token vocabulary shared by source, target and the
(tied) output projection, LayerNorm eps 1e-5, no final encoder or decoder norm: 60,522,496 trainable
parameters. Self-attention projects q/k/v with one fused dense, cross-attention q from the decoder and a
fused k/v from the encoder output; attention is keras.ops.dot_product_attention (causal flag in the decoder;
a key-padding mask on every batch by default, as dlbench's TF model passes one; `--mask auto` only on
batches with padding). Loss: label-smoothed (0.1) cross-entropy over non-padding labels, in float32; Adam
(0.9, 0.98, eps 1e-9) with the paper's schedule (linear warm-up over --lr-warmup steps to d^-0.5 *
warmup^-0.5, then inverse square root), computed inside the step.

Synthetic data made once and kept on the device: a pool of batches of `--batch-tokens // --max-len` sentence
pairs, source and target lengths uniform in [--min-len, --max-len] (all equal with --min-len = --max-len:
dlbench's model.lengths=fixed), padded to --max-len so every step has one shape. Training counts **target
tokens** (non-padding labels) per second; one tf.function call per step (XLA with --xla).
`--mode infer` is greedy decoding with cached keys and values: the encoder once (one tf.function), then
--decode-len positions, each one tf.function call (XLA with --xla) that extends every decoder layer's
key/value cache by one position. `--cache auto` (the default) does what dlbench's TF model does: grown
caches (concatenation) in graph mode, fixed ones with --xla (preallocated to --decode-len, written at t and
masked beyond it, one shape, so XLA compiles the step once instead of once per length, which at 64
positions takes minutes) and puts PAD after a sentence's EOS; decoding never stops early, so the work is fixed; it counts
generated tokens (sentences x decode length) per second. `--loop device` (with --xla) puts the encoder and every
position in one XLA function instead (a tf.while_loop over the same step on fixed caches), so the host launches
one program per batch, as dlbench's model.decode_loop=device.

Usage: python yardsticks/bare_tf_transformer.py [--batch-tokens 5120] [--min-len 8] [--max-len 64] [--xla]
       [--precision amp,bf16,fp32,tf32] [--mode train,infer] [--decode-len N] [--warmup 20] [--steps 20]
       [--windows 8] [--device auto|cuda|cpu] [--mask always|auto] [--vocab 32000] [--d-model 512]
       [--heads 8] [--d-ff 2048] [--layers 6] [--dropout 0.1] [--lr-warmup 4000] [--cache auto|grow|fixed]
       [--loop host|device]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys

import bare_tf_common as common
import keras
import numpy as np
import tensorflow as tf
from bare_data import BOS, EOS, FIRST_WORD, PAD, sentence_pairs, transformer_flags
from keras import layers, ops


def dense(units: int) -> layers.Dense:
    return layers.Dense(units, kernel_initializer="glorot_uniform")


def norm() -> layers.LayerNormalization:
    return layers.LayerNormalization(epsilon=1e-5)


def split_heads(x, h: int):
    s = tf.shape(x)
    return tf.reshape(x, (s[0], s[1], h, -1))  # (B, T, H, D): dot_product_attention's layout


def merge_heads(x):
    s = tf.shape(x)
    return tf.reshape(x, (s[0], s[1], -1))


class SelfAttention(layers.Layer):
    def __init__(self, d: int, heads: int, **kw) -> None:
        super().__init__(**kw)
        self.h, self.qkv, self.out = heads, dense(3 * d), dense(d)

    def call(self, x, mask=None, causal: bool = False):
        q, k, v = (split_heads(t, self.h) for t in tf.split(self.qkv(x), 3, -1))
        return self.out(merge_heads(ops.dot_product_attention(q, k, v, mask=mask, is_causal=causal)))

    def step(self, x, k_cache, v_cache, t=None):
        """One new position (B, 1, d) against the cached keys/values: grown ones (B, t, H, D), extended by
        concatenation (t None), or fixed ones (B, steps, H, D) that position t is written into."""
        q, k, v = (split_heads(t, self.h) for t in tf.split(self.qkv(x), 3, -1))
        if t is None:  # grown: (B, t, H, D) -> (B, t + 1, H, D)
            k, v = tf.concat([k_cache, k], 1), tf.concat([v_cache, v], 1)
            return self.out(merge_heads(ops.dot_product_attention(q, k, v))), k, v
        # fixed: (B, steps, H, D) caches, position t written in, attention over positions <= t only
        at = tf.range(tf.shape(k_cache)[1])
        put = tf.cast(tf.equal(at, t), k.dtype)[None, :, None, None]
        k, v = k_cache * (1 - put) + k * put, v_cache * (1 - put) + v * put
        mask = tf.less_equal(at, t)[None, None, None, :]
        return self.out(merge_heads(ops.dot_product_attention(q, k, v, mask=mask))), k, v


class CrossAttention(layers.Layer):
    def __init__(self, d: int, heads: int, **kw) -> None:
        super().__init__(**kw)
        self.h, self.q, self.kv, self.out = heads, dense(d), dense(2 * d), dense(d)

    def keys_values(self, memory):
        k, v = tf.split(self.kv(memory), 2, -1)
        return split_heads(k, self.h), split_heads(v, self.h)

    def call(self, x, kv, mask):
        return self.out(
            merge_heads(ops.dot_product_attention(split_heads(self.q(x), self.h), *kv, mask=mask))
        )


class EncoderLayer(layers.Layer):
    def __init__(self, d: int, heads: int, d_ff: int, dropout: float, **kw) -> None:
        super().__init__(**kw)
        self.attn, self.ff1, self.ff2 = SelfAttention(d, heads), dense(d_ff), dense(d)
        self.norm1, self.norm2, self.drop = norm(), norm(), layers.Dropout(dropout)

    def call(self, x, mask, training: bool = False):
        x = self.norm1(x + self.drop(self.attn(x, mask), training=training))
        return self.norm2(x + self.drop(self.ff2(tf.nn.relu(self.ff1(x))), training=training))


class DecoderLayer(layers.Layer):
    def __init__(self, d: int, heads: int, d_ff: int, dropout: float, **kw) -> None:
        super().__init__(**kw)
        self.attn, self.cross = SelfAttention(d, heads), CrossAttention(d, heads)
        self.ff1, self.ff2 = dense(d_ff), dense(d)
        self.norm1, self.norm2, self.norm3, self.drop = norm(), norm(), norm(), layers.Dropout(dropout)

    def rest(self, x, kv, mask, training: bool):
        x = self.norm2(x + self.drop(self.cross(x, kv, mask), training=training))
        return self.norm3(x + self.drop(self.ff2(tf.nn.relu(self.ff1(x))), training=training))

    def call(self, x, kv, mask, training: bool = False):
        return self.rest(
            self.norm1(x + self.drop(self.attn(x, causal=True), training=training)), kv, mask, training
        )

    def step(self, x, kv, mask, k_cache, v_cache, t=None):
        y, k, v = self.attn.step(x, k_cache, v_cache, t)
        return self.rest(self.norm1(x + y), kv, mask, False), k, v


def sinusoid(n: int, d: int) -> np.ndarray:
    pos = np.arange(n, dtype=np.float64)[:, None]
    freq = np.power(10000.0, -np.arange(0, d, 2, dtype=np.float64) / d)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(pos * freq), np.cos(pos * freq)
    return pe.astype(np.float32)


class Transformer(keras.Model):
    """Encoder-decoder with one embedding shared by source, target and the output projection."""

    def __init__(self, vocab=32000, d=512, heads=8, d_ff=2048, layers_=6, dropout=0.1, max_len=1024, **kw):
        super().__init__(**kw)
        self.d, self.heads = d, heads
        self.embed = layers.Embedding(
            vocab, d, embeddings_initializer=keras.initializers.RandomNormal(0, d**-0.5)
        )
        self.pe = tf.constant(sinusoid(max_len, d))
        self.enc = [EncoderLayer(d, heads, d_ff, dropout) for _ in range(layers_)]
        self.dec = [DecoderLayer(d, heads, d_ff, dropout) for _ in range(layers_)]
        self.drop = layers.Dropout(dropout)

    def embed_at(self, ids, start=0, training: bool = False):
        x = self.embed(tf.cast(ids, tf.int64))  # int64: see encode
        pe = tf.cast(tf.gather(self.pe, start + tf.range(tf.shape(ids)[1])), x.dtype)  # XLA: static size
        return self.drop(x * math.sqrt(self.d) + pe, training=training)

    def encode(self, src, masked: bool, training: bool = False):
        """Each decoder layer's cross-attention keys/values of the encoder output, and the key mask. Ids are
        compared and looked up as int64: on a GPU TF keeps int32 comparisons and arithmetic in host memory."""
        mask = tf.not_equal(tf.cast(src, tf.int64), PAD)[:, None, None, :] if masked else None
        x = self.embed_at(src, training=training)
        for layer in self.enc:
            x = layer(x, mask, training=training)
        return [layer.cross.keys_values(x) for layer in self.dec], mask

    def logits(self, x):
        # ops.matmul against the transposed table (a tensordot: one (B*T, d) x (d, V) matmul), not
        # tf.matmul(x, w, transpose_b=True): with a 3-D x that is a BatchMatMulV2 broadcasting the table over
        # the batch, whose gradient makes a (B, V, d) tensor per step and sums it over B (21 GB in float16
        # at 640 sentences x 32,000 x 512): the same FLOPs, far more memory traffic
        return ops.matmul(x, ops.transpose(tf.cast(self.embed.embeddings, x.dtype)))

    def call(self, inputs, training: bool = False, masked: bool = True):
        src, tgt_in = inputs
        cross, mask = self.encode(src, masked, training)
        y = self.embed_at(tgt_in, training=training)
        for layer, kv in zip(self.dec, cross, strict=True):
            y = layer(y, kv, mask, training=training)
        return self.logits(y)

    def decode_step(self, prev, done, t, caches, cross, mask, fixed: bool = False):
        """Position t from each sentence's previous token: (next ids, PAD after EOS; done; caches + t)."""
        y = self.embed_at(prev[:, None], t)
        grown = []
        for layer, kv, (k, v) in zip(self.dec, cross, caches, strict=True):
            y, k, v = layer.step(y, kv, mask, k, v, t if fixed else None)
            grown.append((k, v))
        ids = tf.argmax(self.logits(y[:, 0]), -1, output_type=tf.int64)  # int64: see encode
        ids = tf.where(done, tf.zeros_like(ids), ids)
        return ids, tf.logical_or(done, tf.equal(ids, EOS)), grown


def greedy(model: Transformer, src, steps: int, encode, decode, fixed: bool = False) -> list:
    """Greedy decoding of `steps` positions with the key/value caches: the encoder once, then one `decode`
    call (model.decode_step as a tf.function) per position. Returns the (B,) id tensors, one per position."""
    cross, mask = encode(src)
    b = src.shape[0]
    empty = tf.zeros((b, steps if fixed else 0, model.heads, model.d // model.heads), cross[0][0].dtype)
    caches = [(empty, empty)] * len(model.dec)
    ids, done, out = tf.fill([b], tf.constant(BOS, tf.int64)), tf.zeros([b], tf.bool), []
    for t in range(steps):
        ids, done, caches = decode(ids, done, tf.constant(t), caches, cross, mask, fixed)
        out.append(ids)
    return out


def decode_all(model: Transformer, src, steps: int, masked: bool):
    """Greedy decoding of `steps` positions in one function (--loop device, compiled with XLA): the encoder,
    then a tf.while_loop over the positions, each `decode_step` over fixed caches, its ids written into a
    (B, steps) buffer with a select. Returns that buffer."""
    cross, mask = model.encode(src, masked)
    b = src.shape[0]
    empty = tf.zeros((b, steps, model.heads, model.d // model.heads), cross[0][0].dtype)
    at = tf.range(steps)

    def body(t, ids, done, caches, out):
        ids, done, caches = model.decode_step(ids, done, t, caches, cross, mask, fixed=True)
        return t + 1, ids, done, caches, tf.where((at == t)[None, :], ids[:, None], out)

    start = (tf.constant(0), tf.fill([b], tf.constant(BOS, tf.int64)), tf.zeros([b], tf.bool),
             [(empty, empty)] * len(model.dec), tf.zeros([b, steps], tf.int64))  # fmt: skip
    return tf.while_loop(lambda t, *_: t < steps, body, start, maximum_iterations=steps)[-1]


def fixed_cache(a: argparse.Namespace) -> bool:
    """Whether decoding preallocates its caches: --cache, or with auto what dlbench's TF model does (fixed
    under XLA, where grown caches would be compiled once per length)."""
    return a.cache == "fixed" or (a.cache == "auto" and bool(a.xla))


def label_smoothed_ce(logits, labels, eps: float = 0.1):
    logp = tf.nn.log_softmax(tf.cast(logits, tf.float32), -1)
    labels = tf.cast(labels, tf.int64)  # int32 stays in host memory on a GPU (encode)
    nll = -ops.squeeze(ops.take_along_axis(logp, labels[..., None], axis=-1), -1)
    per_token = (1.0 - eps) * nll - eps * tf.reduce_mean(logp, -1)
    keep = tf.cast(tf.not_equal(labels, PAD), tf.float32)
    return tf.reduce_sum(per_token * keep) / tf.maximum(tf.reduce_sum(keep), 1.0)


class Noam(keras.optimizers.schedules.LearningRateSchedule):
    """The paper's schedule: linear warm-up to d^-0.5 * warmup^-0.5, then inverse square root."""

    def __init__(self, d: int, warmup: int) -> None:
        self.peak, self.warmup = d**-0.5 * warmup**-0.5, float(warmup)

    def __call__(self, step):
        s = tf.cast(step, tf.float32) + 1.0
        return self.peak * tf.where(s < self.warmup, s / self.warmup, tf.sqrt(self.warmup / s))

    def get_config(self) -> dict:
        return {"peak": self.peak, "warmup": self.warmup}


def build(a: argparse.Namespace) -> Transformer:
    model = Transformer(
        a.vocab, a.d_model, a.heads, a.d_ff, a.layers, a.dropout, max(1024, a.decode_len or 0)
    )
    model((np.full((1, 2), FIRST_WORD, np.int32), np.full((1, 2), FIRST_WORD, np.int32)))  # make the weights
    return model


def run(a: argparse.Namespace) -> int:
    prec = common.setup(a)
    a.batch_tokens = a.batch_tokens or (5120 if prec.device == "cuda" else 256)
    a.decode_len = a.decode_len or a.max_len
    sentences = max(1, a.batch_tokens // a.max_len)
    masked = a.mask == "always" or a.min_len < a.max_len
    rng = np.random.default_rng(a.seed)
    host = [sentence_pairs(sentences, a, rng) for _ in range(a.pool)]
    counts = [int((labels != PAD).sum()) for _, _, labels in host]
    it = itertools.count()
    with prec.scope():
        model = build(a)
        pool = [tuple(common.on_device(x) for x in batch) for batch in host]
        if a.mode == "train":

            def loss_of(m, src, tgt_in, labels):
                return label_smoothed_ce(m((src, tgt_in), training=True, masked=masked), labels)

            opt = keras.optimizers.Adam(Noam(a.d_model, a.lr_warmup), beta_1=0.9, beta_2=0.98, epsilon=1e-9)
            opt = common.build_optimizer(opt, model, prec)
            fn = common.function(common.train_step(model, opt, loss_of, prec), a)

            def step():
                i = next(it) % a.pool
                return counts[i], fn(*pool[i])
        elif a.loop == "device":
            fn = tf.function(lambda src: decode_all(model, src, a.decode_len, masked), jit_compile=True)

            def step():
                fn(pool[next(it) % a.pool][0])
                return sentences * a.decode_len, None
        else:
            encode = common.function(lambda src: model.encode(src, masked), a)
            # grown caches change shape every call: one relaxed trace in graph mode, but XLA compiles each
            # length once (all met in the warm-up's first decode); fixed caches keep one shape
            decode = tf.function(model.decode_step, jit_compile=bool(a.xla), reduce_retracing=True)

            def step():
                greedy(model, pool[next(it) % a.pool][0], a.decode_len, encode, decode, fixed_cache(a))
                return sentences * a.decode_len, None

    rates, loss = common.measure(step, a, prec)
    unit = "generated tokens/s" if a.mode == "infer" else "target tokens/s"
    return common.report(
        a, prec, rates, loss, model="transformer", params=common.param_count(model), unit=unit, optimizer="adam",
        sentences=sentences, target_tokens_per_batch=sum(counts) / len(counts),
        **({"loop": a.loop} if a.mode == "infer" else {}),
    )  # fmt: skip


def main() -> int:
    p = common.parser(__doc__, warmup=20, steps=20, windows=8)
    transformer_flags(p)
    p.add_argument(
        "--mask", choices=("always", "auto"), default="always",
        help="key-padding mask on every batch (as dlbench's TF model) or only on batches with padding",
    )  # fmt: skip
    p.add_argument(
        "--cache", choices=("auto", "grow", "fixed"), default="auto",
        help="decoding's key/value caches: grown by concatenation or preallocated to --decode-len with a "
        "position mask (one shape: XLA compiles the step once); auto = fixed with --xla, as dlbench's TF model",
    )  # fmt: skip
    a = p.parse_known_args()[0]
    if a.loop == "device" and not a.xla:
        p.error("--loop device decodes in one XLA call: add --xla")
    return common.run_all(p, run)


if __name__ == "__main__":
    sys.exit(main())
