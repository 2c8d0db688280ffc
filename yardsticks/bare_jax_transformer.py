"""JAX yardstick for the Transformer: the translation training loop and greedy decoder a careful Flax + Optax
user writes by hand, no harness around them.

Transformer-base (Vaswani et al. 2017) in plain Flax linen, as dlbench's Flax model: post-norm, d_model 512,
8 heads, FFN 2048, 6 + 6 layers, dropout 0.1, sinusoidal positions, one 32,000-token vocabulary shared by
source, target and the (tied) output projection (`Embed.attend`), LayerNorm eps 1e-5 (torch's), no final
encoder or decoder norm, Glorot-uniform dense kernels with zero biases, the embedding N(0, d^-0.5):
60,522,496 trainable parameters. Self-attention projects q/k/v with one fused dense, cross-attention q from
the decoder and a fused k/v from the encoder output; attention is `jax.nn.dot_product_attention` (causal flag
in the decoder, a key-padding mask of the source on every batch, as dlbench's JAX model), except for one
query position (decoding), where XLA's GPU backend refuses that call's F16_F16_F32 dot algorithm: there
softmax(q k^T / sqrt(D)) v is two einsums with float32 logits. Loss: label-smoothed (0.1) cross-entropy over
non-padding labels, in float32; Adam (0.9, 0.98, eps 1e-9) with the paper's schedule (linear warm-up over
--lr-warmup steps to d^-0.5 * warmup^-0.5, then inverse square root) as an Optax schedule of the step count,
traced into the step; a hand-written `jax.jit` step with its state donated, its dropout masks drawn from
the state's key (XLA's RngBitGenerator as dlbench's worker, unless --prng says otherwise).

Synthetic data made once and kept on the device: a pool of batches of `--batch-tokens // --max-len` sentence
pairs, source and target lengths uniform in [--min-len, --max-len] (all equal with --min-len = --max-len:
dlbench's model.lengths=fixed), padded to --max-len so every step has one shape. Training counts **target
tokens** (non-padding labels) per second. `--mode infer` is greedy decoding with cached keys and values, as
bare_tf_transformer.py --cache fixed and dlbench's JAX model: the encoder once (one jitted call giving every
decoder layer's cross-attention keys/values), then --decode-len positions, each one jitted call over
self-attention caches preallocated to --decode-len (written at t, masked beyond it: one shape, compiled once;
the caches donated) that puts PAD after a sentence's EOS; decoding never stops early, so the work is fixed;
it counts generated tokens (sentences x decode length) per second. `--loop device` puts the encoder and every
position in one jitted call instead (a fori_loop over the same step), so the host launches one program per
batch.

Usage: python yardsticks/bare_jax_transformer.py [--batch-tokens 5120] [--min-len 8] [--max-len 64]
       [--no-jit] [--precision amp,bf16,fp32,tf32] [--mode train,infer] [--decode-len N] [--warmup 20]
       [--steps 20] [--windows 8] [--device auto|cuda|cpu] [--vocab 32000] [--d-model 512] [--heads 8]
       [--d-ff 2048] [--layers 6] [--dropout 0.1] [--lr-warmup 4000] [--loop host|device]
       [--prng rbg|threefry2x32]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from typing import Any

import bare_jax_common as common
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from bare_data import BOS, EOS, FIRST_WORD, PAD, sentence_pairs, transformer_flags

MAX_POSITIONS = 1024


def attend(q, k, v, mask, causal: bool = False):
    """Scaled dot-product attention over (B, T, H, D); one query position as two einsums (see above)."""
    if q.shape[1] != 1:
        return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=causal)
    logits = jnp.einsum("BTNH,BSNH->BNTS", q, k, preferred_element_type=jnp.float32) / math.sqrt(q.shape[-1])
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    return jnp.einsum("BNTS,BSNH->BTNH", jax.nn.softmax(logits, axis=-1).astype(v.dtype), v)


class Layer(nn.Module):
    d: int
    heads: int
    dtype: Any = jnp.float32

    def dense(self, units: int) -> nn.Dense:
        init = nn.initializers.glorot_uniform()
        return nn.Dense(units, kernel_init=init, bias_init=nn.initializers.zeros, dtype=self.dtype)

    def norm(self) -> nn.LayerNorm:
        return nn.LayerNorm(epsilon=1e-5, dtype=self.dtype)

    def split(self, x):
        return x.reshape(*x.shape[:2], self.heads, -1)  # (B, T, H, D): dot_product_attention's layout


def merge(x):
    return x.reshape(*x.shape[:2], -1)


class SelfAttention(Layer):
    def setup(self) -> None:
        self.qkv, self.out = self.dense(3 * self.d), self.dense(self.d)

    def __call__(self, x, mask=None, causal: bool = False):
        q, k, v = (self.split(p) for p in jnp.split(self.qkv(x), 3, axis=-1))
        return self.out(merge(attend(q, k, v, mask, causal)))

    def step(self, x, t, k_cache, v_cache):
        """One new position (B, 1, d) against (B, steps, H, D) caches: its keys/values written at t, the
        positions after t masked out. Returns (output, keys, values)."""
        q, k, v = (self.split(p) for p in jnp.split(self.qkv(x), 3, axis=-1))
        k_cache = jax.lax.dynamic_update_slice(k_cache, k.astype(k_cache.dtype), (0, t, 0, 0))
        v_cache = jax.lax.dynamic_update_slice(v_cache, v.astype(v_cache.dtype), (0, t, 0, 0))
        seen = (jnp.arange(k_cache.shape[1]) <= t)[None, None, None, :]
        return self.out(merge(attend(q, k_cache, v_cache, seen))), k_cache, v_cache


class CrossAttention(Layer):
    def setup(self) -> None:
        self.q, self.kv, self.out = self.dense(self.d), self.dense(2 * self.d), self.dense(self.d)

    def keys_values(self, memory):
        k, v = jnp.split(self.kv(memory), 2, axis=-1)
        return self.split(k), self.split(v)

    def __call__(self, x, kv, mask):
        return self.out(merge(attend(self.split(self.q(x)), *kv, mask)))


class EncoderLayer(Layer):
    d_ff: int = 2048
    dropout: float = 0.1

    def setup(self) -> None:
        self.self_attn = SelfAttention(self.d, self.heads, self.dtype)
        self.ff1, self.ff2 = self.dense(self.d_ff), self.dense(self.d)
        self.norm1, self.norm2, self.drop = self.norm(), self.norm(), nn.Dropout(self.dropout)

    def __call__(self, x, mask, train: bool = False):
        x = self.norm1(x + self.drop(self.self_attn(x, mask), deterministic=not train))
        return self.norm2(x + self.drop(self.ff2(nn.relu(self.ff1(x))), deterministic=not train))


class DecoderLayer(Layer):
    d_ff: int = 2048
    dropout: float = 0.1

    def setup(self) -> None:
        self.self_attn = SelfAttention(self.d, self.heads, self.dtype)
        self.cross_attn = CrossAttention(self.d, self.heads, self.dtype)
        self.ff1, self.ff2 = self.dense(self.d_ff), self.dense(self.d)
        self.norm1, self.norm2, self.norm3 = self.norm(), self.norm(), self.norm()
        self.drop = nn.Dropout(self.dropout)

    def keys_values(self, memory):
        return self.cross_attn.keys_values(memory)

    def rest(self, x, kv, mask, train: bool):
        x = self.norm2(x + self.drop(self.cross_attn(x, kv, mask), deterministic=not train))
        return self.norm3(x + self.drop(self.ff2(nn.relu(self.ff1(x))), deterministic=not train))

    def __call__(self, x, kv, mask, train: bool = False):
        x = self.norm1(x + self.drop(self.self_attn(x, causal=True), deterministic=not train))
        return self.rest(x, kv, mask, train)

    def step(self, x, t, kv, mask, cache):
        y, k, v = self.self_attn.step(x, t, *cache)
        return self.rest(self.norm1(x + y), kv, mask, False), (k, v)


class Transformer(nn.Module):
    """Encoder-decoder with one embedding shared by source, target and the output projection."""

    vocab: int = 32000
    d: int = 512
    heads: int = 8
    d_ff: int = 2048
    layers: int = 6
    dropout: float = 0.1
    dtype: Any = jnp.float32

    def setup(self) -> None:
        init = nn.initializers.normal(self.d**-0.5)
        self.embed = nn.Embed(self.vocab, self.d, embedding_init=init, dtype=self.dtype)
        sizes = (self.d, self.heads, self.dtype, self.d_ff, self.dropout)
        self.enc = [EncoderLayer(*sizes) for _ in range(self.layers)]
        self.dec = [DecoderLayer(*sizes) for _ in range(self.layers)]
        self.drop = nn.Dropout(self.dropout)
        self.pe = sinusoid(MAX_POSITIONS, self.d)

    def embed_at(self, ids, train: bool):
        x = self.embed(ids) * math.sqrt(self.d)
        return self.drop(x + jnp.asarray(self.pe[: ids.shape[1]], x.dtype), deterministic=not train)

    def encode(self, src, train: bool = False):
        """Each decoder layer's cross-attention keys/values of the encoder output, and the key mask."""
        mask = (src != PAD)[:, None, None, :]
        x = self.embed_at(src, train)
        for layer in self.enc:
            x = layer(x, mask, train)
        return [layer.keys_values(x) for layer in self.dec], mask

    def __call__(self, src, tgt_in, train: bool = False):
        """Teacher-forced logits (B, T, vocab)."""
        cross, mask = self.encode(src, train)
        y = self.embed_at(tgt_in, train)
        for layer, kv in zip(self.dec, cross, strict=True):
            y = layer(y, kv, mask, train)
        return self.embed.attend(y)

    def start(self, src, steps: int):
        """(cross-attention keys/values, source mask, zero self-attention caches of `steps` positions)."""
        cross, mask = self.encode(src)
        k = cross[0][0]
        empty = jnp.zeros((k.shape[0], steps, *k.shape[2:]), k.dtype)
        return cross, mask, [(empty, empty) for _ in self.dec]

    def decode_step(self, prev, done, t, cross, mask, caches):
        """Position t from each sentence's previous token: (next ids, PAD after EOS; done; caches written at t)."""
        x = self.embed(prev[:, None]) * math.sqrt(self.d)
        x = x + jax.lax.dynamic_slice_in_dim(jnp.asarray(self.pe), t, 1)[None].astype(x.dtype)
        written = []
        for layer, kv, cache in zip(self.dec, cross, caches, strict=True):
            x, cache = layer.step(x, t, kv, mask, cache)
            written.append(cache)
        ids = jnp.where(done, PAD, jnp.argmax(self.embed.attend(x[:, 0]), axis=-1).astype(jnp.int32))
        return ids, done | (ids == EOS), written


def sinusoid(n: int, d: int) -> np.ndarray:
    pos = np.arange(n, dtype=np.float64)[:, None]
    freq = np.power(10000.0, -np.arange(0, d, 2, dtype=np.float64) / d)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(pos * freq), np.cos(pos * freq)
    return pe.astype(np.float32)


def label_smoothed_ce(logits, labels, eps: float = 0.1):
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    nll = -jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
    per_token = (1.0 - eps) * nll - eps * logp.mean(axis=-1)
    keep = (labels != PAD).astype(jnp.float32)
    return (per_token * keep).sum() / jnp.maximum(keep.sum(), 1.0)


def noam(d: int, warmup: int):
    """The paper's schedule of the step count: linear warm-up to d^-0.5 * warmup^-0.5, then 1/sqrt."""
    peak, w = d**-0.5 * warmup**-0.5, float(warmup)

    def lr(count):
        s = count.astype(jnp.float32) + 1.0
        return peak * jnp.where(s < w, s / w, jnp.sqrt(w / s))

    return lr


def greedy_decoder(model: Transformer, steps: int, sentences: int, a: argparse.Namespace):
    """`decode(params, src)`: greedy decoding of `steps` positions with fixed-size key/value caches, the
    encoder one jitted call and each position one more (the caches donated to it); returns the (B,) id
    arrays, one per position, left on the device."""
    start = common.jit(lambda p, src: model.apply({"params": p}, src, steps, method=Transformer.start), a)
    position = common.jit(
        lambda p, prev, done, t, cross, mask, caches: model.apply(
            {"params": p}, prev, done, t, cross, mask, caches, method=Transformer.decode_step
        ),
        a,
        donate=(6,),
    )
    positions = [jax.device_put(np.int32(t)) for t in range(steps)]
    bos = jax.device_put(np.full(sentences, BOS, np.int32))
    not_done = jax.device_put(np.zeros(sentences, bool))

    def decode(params, src) -> list:
        cross, mask, caches = start(params, src)
        prev, done, out = bos, not_done, []
        for t in positions:
            prev, done, caches = position(params, prev, done, t, cross, mask, caches)
            out.append(prev)
        return out

    return decode


def device_loop_decoder(model: Transformer, steps: int):
    """`decode(params, src)` for --loop device: the encoder and `steps` positions in one jitted call, a
    fori_loop over `decode_step` writing each position's ids into a (B, steps) array, which it returns."""

    def decode_all(params, src):
        cross, mask, caches = model.apply({"params": params}, src, steps, method=Transformer.start)
        b = src.shape[0]

        def body(t, carry):
            prev, done, caches, out = carry
            prev, done, caches = model.apply(
                {"params": params}, prev, done, t, cross, mask, caches, method=Transformer.decode_step
            )
            return prev, done, caches, jax.lax.dynamic_update_slice_in_dim(out, prev[:, None], t, axis=1)

        start = (
            jnp.full((b,), BOS, jnp.int32),
            jnp.zeros((b,), bool),
            caches,
            jnp.zeros((b, steps), jnp.int32),
        )
        return jax.lax.fori_loop(0, steps, body, start)[-1]

    return jax.jit(decode_all)


def build(a: argparse.Namespace, dtype: Any = jnp.float32) -> Transformer:
    return Transformer(a.vocab, a.d_model, a.heads, a.d_ff, a.layers, a.dropout, dtype)


def run(a: argparse.Namespace) -> int:
    prec = common.setup(a)
    a.batch_tokens = a.batch_tokens or (5120 if prec.device == "cuda" else 256)
    a.decode_len = a.decode_len or a.max_len
    sentences = max(1, a.batch_tokens // a.max_len)
    rng = np.random.default_rng(a.seed)
    host = [sentence_pairs(sentences, a, rng) for _ in range(a.pool)]
    counts = [int((labels != PAD).sum()) for _, _, labels in host]
    pool = [jax.device_put(batch) for batch in host]
    it = itertools.count()
    model = build(a, prec.dtype)
    ids = jnp.full((1, 2), FIRST_WORD, jnp.int32)
    # XLA's RngBitGenerator (as dlbench's JAX worker): the initialisers compile far faster than threefry's
    init = jax.jit(lambda k: model.init({"params": k, "dropout": k}, ids, ids))
    params = init(jax.random.key(a.seed, impl="rbg"))["params"]
    if a.mode == "train":

        def apply_loss(p, stats, key, src, tgt_in, labels):
            logits = model.apply({"params": p}, src, tgt_in, train=True, rngs={"dropout": key})
            return label_smoothed_ce(logits, labels), stats

        tx = optax.adam(noam(a.d_model, a.lr_warmup), b1=0.9, b2=0.98, eps=1e-9)
        fn = common.jit(common.train_step(apply_loss, tx, prec), a, donate=(0,))
        state = jax.device_put((params, {}, tx.init(params), common.loss_scale(prec), common.step_key(a)))

        def step():
            nonlocal state
            i = next(it) % a.pool
            state, loss = fn(state, *pool[i])
            return counts[i], loss
    else:
        steps = a.decode_len
        if a.loop == "device":
            decode_all = device_loop_decoder(model, steps)

            def step():
                return sentences * steps, decode_all(params, pool[next(it) % a.pool][0])
        else:
            decode = greedy_decoder(model, steps, sentences, a)

            def step():
                return sentences * steps, decode(params, pool[next(it) % a.pool][0])[-1]

    rates, out = common.measure(step, a)
    train = a.mode == "train"
    return common.report(
        a, prec, rates, out if train else None, model="transformer", params=common.param_count(params),
        unit="target tokens/s" if train else "generated tokens/s", optimizer="optax", sentences=sentences,
        target_tokens_per_batch=sum(counts) / len(counts), cache="fixed",
        **({"loop": a.loop} if a.mode == "infer" else {}),
    )  # fmt: skip


def main() -> int:
    p = common.parser(__doc__, warmup=20, steps=20, windows=8)
    transformer_flags(p)
    a = p.parse_known_args()[0]
    if a.loop == "device" and not a.jit:
        p.error("--loop device decodes in one jitted call: drop --no-jit")
    return common.run_all(p, run)


if __name__ == "__main__":
    sys.exit(main())
