"""Transformer (Vaswani et al. 2017, post-norm) in Flax, equal to the torch, Keras and Gluon ones.

Layer for layer the network of workloads/translation/torch.py (dlbench.workloads.translation.transformer
holds what the four share): tied embedding as the output projection (`Embed.attend`), LayerNorm epsilon
1e-5 as torch (Flax's default is 1e-6), Glorot-uniform dense kernels with zero biases, the embedding
N(0, d^-0.5). Attention is `jax.nn.dot_product_attention` (XLA's fused kernel, cuDNN's where it picks
one), except for one query position (greedy decoding): there its XLA path asks for the F16_F16_F32 dot
algorithm, which XLA's GPU backend refuses for that shape ("Unsupported dot precision algorithm", H200), so
the same softmax(q k^T / sqrt(D)) v is written out with float32 logits. Dense kernels are (in, out): the
transpose of the neutral (out, in) weights.

Greedy decoding is a host loop (the shared `greedy_decode`, fused): the encoder is one jitted call, and
each position one more over fixed-length key/value caches written at t and masked beyond it, so XLA
compiles the step once per batch shape (as TF's XLA path does); the caches are donated to the step. With
model.decode_loop=device the same encoder and step run inside one jitted fori_loop instead.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dlbench.backends.jax.family import JaxFamily, Network
from dlbench.core.spec import TaskSpec
from dlbench.workloads.translation.spec import TranslationConfig, model_size
from dlbench.workloads.translation.transformer import (
    BOS,
    EOS,
    LABEL_SMOOTHING,
    PAD,
    TransformerSize,
    greedy_decode,
    sinusoid_positions,
    trim_padding,
    weight_shapes,
)

ATTENTION = "jax.nn.dot_product_attention"
MAX_POSITIONS = 1024
LN_EPS = 1e-5


class _Layers(nn.Module):
    """The dtypes and sizes every block shares."""

    d: int
    heads: int
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32

    def dense(self, units: int, name: str) -> nn.Dense:
        return nn.Dense(
            units, kernel_init=nn.initializers.glorot_uniform(), bias_init=nn.initializers.zeros,
            dtype=self.dtype, param_dtype=self.param_dtype, name=name,
        )  # fmt: skip

    def split_heads(self, x: jax.Array) -> jax.Array:
        """(B, T, H*D) -> (B, T, H, D), the layout dot_product_attention takes."""
        return x.reshape(*x.shape[:2], self.heads, -1)


def _merge(x: jax.Array) -> jax.Array:
    return x.reshape(*x.shape[:2], -1)


def _attend(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None, causal: bool = False
) -> jax.Array:
    """Scaled dot-product attention over (B, T, H, D) queries; one query position as plain einsums (see the
    module docstring), float32 logits and softmax as dot_product_attention's XLA path."""
    if q.shape[1] != 1:
        return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=causal)
    logits = jnp.einsum("BTNH,BSNH->BNTS", q, k, preferred_element_type=jnp.float32) / math.sqrt(q.shape[-1])
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    return jnp.einsum("BNTS,BSNH->BTNH", probs, v)


class _SelfAttention(_Layers):
    def setup(self) -> None:
        self.qkv = self.dense(3 * self.d, "qkv")
        self.out = self.dense(self.d, "out")

    def _qkv(self, x: jax.Array) -> list[jax.Array]:
        return [self.split_heads(p) for p in jnp.split(self.qkv(x), 3, axis=-1)]

    def __call__(self, x: jax.Array, keep: jax.Array | None, causal: bool) -> jax.Array:
        """keep: bool (B, 1, 1, S) key mask or None."""
        q, k, v = self._qkv(x)
        return self.out(_merge(_attend(q, k, v, keep, causal)))

    def step_at(self, x: jax.Array, t: jax.Array, k_cache: jax.Array, v_cache: jax.Array) -> tuple:
        """One new position (B, 1, d) against fixed-length caches (B, max_len, H, D): this position's
        keys/values written at t, positions after t masked out. Returns (output, keys, values)."""
        q, k, v = self._qkv(x)
        k_cache = jax.lax.dynamic_update_slice(k_cache, k.astype(k_cache.dtype), (0, t, 0, 0))
        v_cache = jax.lax.dynamic_update_slice(v_cache, v.astype(v_cache.dtype), (0, t, 0, 0))
        seen = (jnp.arange(k_cache.shape[1]) <= t)[None, None, None, :]
        y = _attend(q, k_cache, v_cache, seen)
        return self.out(_merge(y)), k_cache, v_cache


class _CrossAttention(_Layers):
    def setup(self) -> None:
        self.q = self.dense(self.d, "q")
        self.kv = self.dense(2 * self.d, "kv")
        self.out = self.dense(self.d, "out")

    def keys_values(self, memory: jax.Array) -> tuple[jax.Array, jax.Array]:
        k, v = jnp.split(self.kv(memory), 2, axis=-1)
        return self.split_heads(k), self.split_heads(v)

    def __call__(self, x: jax.Array, kv: tuple, keep: jax.Array) -> jax.Array:
        y = _attend(self.split_heads(self.q(x)), *kv, keep)
        return self.out(_merge(y))


class _Block(_Layers):
    ffn: int = 2048
    dropout: float = 0.1

    def norm(self, name: str) -> nn.LayerNorm:
        return nn.LayerNorm(epsilon=LN_EPS, dtype=self.dtype, param_dtype=self.param_dtype, name=name)

    def sizes(self) -> dict[str, Any]:
        return {"d": self.d, "heads": self.heads, "dtype": self.dtype, "param_dtype": self.param_dtype}

    def feed_forward(self, x: jax.Array, train: bool) -> jax.Array:
        return self.drop(self.ff2(nn.relu(self.ff1(x))), deterministic=not train)


class _EncoderLayer(_Block):
    def setup(self) -> None:
        self.self_attn = _SelfAttention(**self.sizes(), name="self_attn")
        self.norm1, self.norm2 = self.norm("norm1"), self.norm("norm2")
        self.ff1, self.ff2 = self.dense(self.ffn, "ff1"), self.dense(self.d, "ff2")
        self.drop = nn.Dropout(self.dropout)

    def __call__(self, x: jax.Array, keep: jax.Array, train: bool = False) -> jax.Array:
        x = self.norm1(x + self.drop(self.self_attn(x, keep, causal=False), deterministic=not train))
        return self.norm2(x + self.feed_forward(x, train))


class _DecoderLayer(_Block):
    def setup(self) -> None:
        self.self_attn = _SelfAttention(**self.sizes(), name="self_attn")
        self.cross_attn = _CrossAttention(**self.sizes(), name="cross_attn")
        self.norm1, self.norm2, self.norm3 = self.norm("norm1"), self.norm("norm2"), self.norm("norm3")
        self.ff1, self.ff2 = self.dense(self.ffn, "ff1"), self.dense(self.d, "ff2")
        self.drop = nn.Dropout(self.dropout)

    def _rest(self, x: jax.Array, kv: tuple, src_keep: jax.Array, train: bool) -> jax.Array:
        x = self.norm2(x + self.drop(self.cross_attn(x, kv, src_keep), deterministic=not train))
        return self.norm3(x + self.feed_forward(x, train))

    def __call__(self, x: jax.Array, kv: tuple, src_keep: jax.Array, train: bool = False) -> jax.Array:
        x = self.norm1(x + self.drop(self.self_attn(x, None, causal=True), deterministic=not train))
        return self._rest(x, kv, src_keep, train)

    def keys_values(self, memory: jax.Array) -> tuple[jax.Array, jax.Array]:
        return self.cross_attn.keys_values(memory)

    def step_at(self, x: jax.Array, t: jax.Array, kv: tuple, src_keep: jax.Array, cache: tuple) -> tuple:
        y, k, v = self.self_attn.step_at(x, t, *cache)
        return self._rest(self.norm1(x + y), kv, src_keep, False), (k, v)


class Transformer(nn.Module):
    """Encoder-decoder with a shared vocabulary; the output projection is the (tied) embedding."""

    size: TransformerSize
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32

    def setup(self) -> None:
        s = self.size
        self.embed = nn.Embed(
            s.vocab, s.d_model, embedding_init=nn.initializers.normal(s.d_model**-0.5), dtype=self.dtype,
            param_dtype=self.param_dtype, name="embed",
        )  # fmt: skip
        block = {
            "d": s.d_model, "heads": s.heads, "ffn": s.ffn, "dropout": s.dropout, "dtype": self.dtype,
            "param_dtype": self.param_dtype,
        }  # fmt: skip
        self.enc = [_EncoderLayer(**block, name=f"enc_{i}") for i in range(s.encoder_layers)]
        self.dec = [_DecoderLayer(**block, name=f"dec_{i}") for i in range(s.decoder_layers)]
        self.drop = nn.Dropout(s.dropout)
        self.pe = sinusoid_positions(MAX_POSITIONS, s.d_model)

    def _embed(self, ids: jax.Array, train: bool) -> jax.Array:
        x = self.embed(ids) * math.sqrt(self.size.d_model)
        x = x + jnp.asarray(self.pe[: ids.shape[1]], x.dtype)
        return self.drop(x, deterministic=not train)

    def encode(self, src: jax.Array, train: bool = False) -> tuple[jax.Array, jax.Array]:
        keep = (src != PAD)[:, None, None, :]
        x = self._embed(src, train)
        for layer in self.enc:
            x = layer(x, keep, train)
        return x, keep

    def __call__(self, src: jax.Array, tgt_in: jax.Array, train: bool = False) -> jax.Array:
        """Teacher-forced logits (B, T, vocab) for (src, tgt_in = [BOS] + target, padded)."""
        memory, keep = self.encode(src, train)
        x = self._embed(tgt_in, train)
        for layer in self.dec:
            x = layer(x, layer.keys_values(memory), keep, train)
        return self.embed.attend(x)

    def start_decoding(self, src: jax.Array, max_len: int) -> tuple:
        """(source key mask, every decoder layer's cross-attention keys/values, zero self-attention
        caches of max_len positions)."""
        memory, keep = self.encode(src)
        cross = [layer.keys_values(memory) for layer in self.dec]
        k = cross[0][0]
        empty = jnp.zeros((k.shape[0], max_len, *k.shape[2:]), k.dtype)
        return keep, cross, [(empty, empty) for _ in self.dec]

    def decode_at(self, prev: jax.Array, t: jax.Array, keep: jax.Array, cross: list, caches: list) -> tuple:
        """The decoder at position t for the previous tokens: (argmax ids, caches written at t)."""
        x = self.embed(prev[:, None]) * math.sqrt(self.size.d_model)
        pe = jax.lax.dynamic_slice_in_dim(jnp.asarray(self.pe), t, 1)
        x = x + pe[None].astype(x.dtype)
        written = []
        for layer, kv, cache in zip(self.dec, cross, caches, strict=True):
            x, cache = layer.step_at(x, t, kv, keep, cache)
            written.append(cache)
        return jnp.argmax(self.embed.attend(x[:, 0]), axis=-1).astype(jnp.int32), written


def _start(module: Transformer, variables: dict, src: jax.Array, max_len: int) -> tuple:
    return module.apply(variables, src, max_len, method=Transformer.start_decoding)


def _position(module: Transformer, variables: dict, prev, done, t, keep, caches, cross) -> tuple:
    """One position of greedy decoding in one call: (ids with PAD after EOS, done, caches)."""
    ids, caches = module.apply(variables, prev, t, keep, cross, caches, method=Transformer.decode_at)
    ids = jnp.where(done, PAD, ids)
    return ids, done | (ids == EOS), caches


def _decode_all(module: Transformer, variables: dict, src: jax.Array, max_len: int) -> jax.Array:
    """Every position of greedy decoding in one program (loop="device"): the encoder, then a fori_loop
    over the positions, each one `_position`, its ids written into a (B, max_len) buffer."""
    keep, cross, caches = _start(module, variables, src, max_len)
    batch = src.shape[0]

    def body(t: jax.Array, carry: tuple) -> tuple:
        prev, done, caches, out = carry
        ids, done, caches = _position(module, variables, prev, done, t, keep, caches, cross)
        return ids, done, caches, jax.lax.dynamic_update_slice_in_dim(out, ids[:, None], t, axis=1)

    start = (
        jnp.full((batch,), BOS, jnp.int32),
        jnp.zeros((batch,), bool),
        caches,
        jnp.zeros((batch, max_len), jnp.int32),
    )
    return jax.lax.fori_loop(0, max_len, body, start)[-1]


# framework.jit: the encoder and the step compiled (the caches donated), else run op by op
_JITTED = (
    jax.jit(_start, static_argnums=(0, 3)),
    jax.jit(_position, static_argnums=0, donate_argnums=6),
)
_DECODE_ALL = jax.jit(_decode_all, static_argnums=(0, 3))


@functools.lru_cache(maxsize=64)
def _positions(max_len: int, device: str) -> tuple[jax.Array, ...]:
    """The positions 0..max_len-1 as int32 scalars on the default device (`device` names it, for the
    cache), put there once: a scalar made per position (jnp.int32(t)) is one more host->device transfer
    per decoding position, which a hand-written loop (yardsticks/bare_jax_transformer.py) does not make."""
    return tuple(jax.device_put(np.int32(t)) for t in range(max_len))


@functools.lru_cache(maxsize=64)
def _filled(n: int, value: int, device: str) -> jax.Array:
    """An (n,) int32 array of `value` on the default device, made once (JaxOps.full: BOS and PAD)."""
    return jax.device_put(np.full(n, value, np.int32))


def translate(
    net: Network,
    variables: dict,
    src: jax.Array,
    max_len: int,
    check_every: int = 1,
    jit: bool = True,
    loop: str = "host",
    read_back: bool = True,
) -> Any:
    """Greedy decoding with cached keys/values (the shared greedy_decode loop, fused: PAD after EOS
    inside the step); the tokens stay on the device until the end. `loop="device"` (jit only) decodes
    every position in one jitted call (`_decode_all`): no early stop, the same tokens once the PAD columns
    are cut, as the host loop cuts them. Returns numpy ids without the PAD columns; `read_back=False`
    (the bench's inference step) leaves the uncut (B, steps) ids on the device (greedy_decode says why)."""
    if loop == "device":
        if not jit:
            raise ValueError("loop='device' decodes in one jitted call: it needs jit=True")
        ids = _DECODE_ALL(net.module, variables, src, max_len)
        return trim_padding(np.asarray(ids)) if read_back else ids
    start, position = _JITTED if jit else (_start, _position)
    keep, cross, caches = start(net.module, variables, src, max_len)
    positions = _positions(max_len, str(jax.config.jax_default_device))

    def step(prev: jax.Array, done: jax.Array, t: int) -> tuple[jax.Array, jax.Array]:
        nonlocal caches
        ids, done, caches = position(net.module, variables, prev, done, positions[t], keep, caches, cross)
        return ids, done

    batch = int(src.shape[0])
    return greedy_decode(step, batch, max_len, JaxOps(), check_every, fused=True, read_back=read_back)


class JaxOps:
    """dlbench.workloads.translation.transformer.DecodeOps on JAX arrays."""

    def full(self, n: int, value: int) -> jax.Array:
        return _filled(n, value, str(jax.config.jax_default_device))

    def where(self, cond: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.where(cond, a, b)

    def equal(self, a: jax.Array, value: int) -> jax.Array:
        return a == value

    def logical_or(self, a: jax.Array, b: jax.Array) -> jax.Array:
        return a | b

    def all(self, a: jax.Array) -> bool:
        return bool(jnp.all(a))

    def stack(self, columns: list[jax.Array]) -> jax.Array:
        return jnp.stack(columns, axis=1)

    def to_numpy(self, ids: jax.Array) -> np.ndarray:
        return np.asarray(ids).astype(np.int32)


def build_transformer(
    size: TransformerSize, dtype: Any = jnp.float32, param_dtype: Any = jnp.float32
) -> Network:
    """The network of `size` with its variables initialised (as the bench does, for tests and tools)."""
    module = Transformer(size, dtype, param_dtype)
    ids = jnp.full((1, 2), BOS + 3, dtype=jnp.int32)
    init = jax.jit(lambda key: module.init({"params": key, "dropout": key}, ids, ids))
    return Network(module, dict(init(jax.random.key(0))))


def label_smoothed_ce(logits: jax.Array, labels: jax.Array, eps: float = LABEL_SMOOTHING) -> jax.Array:
    """Mean over non-pad labels of (1 - eps) * NLL + eps * mean over the vocabulary of -log p, in float32
    (the torch, Keras and Gluon losses are the same formula)."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    labels = labels.astype(jnp.int32)
    nll = -jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
    per_token = (1.0 - eps) * nll - eps * logp.mean(axis=-1)
    keep = (labels != PAD).astype(jnp.float32)
    return (per_token * keep).sum() / jnp.maximum(keep.sum(), 1.0)


# --- framework-neutral weights ----------------------------------------------------------------------
def _path(name: str) -> tuple[tuple[str, ...], bool]:
    """Neutral name -> (Flax parameter path, stored transposed?): `enc.0.ff1.weight` is
    params["enc_0"]["ff1"]["kernel"], transposed; norms' weight is "scale"; the embedding "embedding"."""
    if name == "embed.weight":
        return ("embed", "embedding"), False
    stack, index, *layers, leaf = name.split(".")
    norm = layers[-1].startswith("norm")
    if leaf == "bias":
        return (f"{stack}_{index}", *layers, "bias"), False
    return (f"{stack}_{index}", *layers, "scale" if norm else "kernel"), not norm


def load_neutral(net: Network, weights: dict[str, np.ndarray]) -> None:
    """Put framework-neutral weights (transformer.weight_shapes names) in as the network's parameters."""
    shapes = weight_shapes(net.module.size)
    if set(weights) != set(shapes):
        raise KeyError(f"weights differ from the model's: {sorted(set(weights) ^ set(shapes))[:5]}")
    params: dict[str, Any] = {}
    for name in shapes:
        path, transposed = _path(name)
        w = np.asarray(weights[name], dtype=np.float32)
        node = params
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = jnp.asarray(w.T if transposed else w, net.module.param_dtype)
    net.variables = {**net.variables, "params": params}


def neutral_weights(net: Network) -> dict[str, np.ndarray]:
    """The network's weights under the neutral names, dense weights (out, in)."""
    params = jax.device_get(net.params)
    out = {}
    for name in weight_shapes(net.module.size):
        path, transposed = _path(name)
        node = params
        for part in path:
            node = node[part]
        w = np.asarray(node, dtype=np.float32)
        out[name] = (w.T if transposed else w).copy()
    return out


class TranslationJax(JaxFamily):
    """The Transformer (greedy decoding for inference, label-smoothed cross-entropy), in Flax."""

    eager_infer = True  # a host loop over jitted decoder steps: the bench must not trace it whole
    jit = True
    decode_loop = "host"  # model.decode_loop (build_model)

    def build_model(self, cfg: TranslationConfig, dtype: Any, param_dtype: Any) -> nn.Module:
        self.decode_loop = cfg.decode_loop
        return Transformer(model_size(cfg), dtype, param_dtype)

    def compile_infer(self, jit: bool) -> None:
        """framework.jit: the encoder and the decoding step are jitted (the host loop stays), or with
        model.decode_loop=device the whole decode is one jitted call."""
        self.jit = jit

    def infer(self, net: Network, variables: dict, inputs: tuple) -> Any:
        """Greedy decoding of every sentence for as many steps as the target side is long (no early
        stop: every framework does the same work; workloads/translation/source.py counts it); the ids
        are left on the device, unread (greedy_decode says why)."""
        src, tgt_in = inputs
        steps, loop = int(tgt_in.shape[1]), self.decode_loop if self.jit else "host"
        return translate(net, variables, src, steps, check_every=0, jit=self.jit, loop=loop, read_back=False)

    export_weights = staticmethod(neutral_weights)
    load_weights = staticmethod(load_neutral)

    def run_facts(self, net: Network) -> dict[str, str]:
        """The attention kernel, and greedy decoding's loop as the family runs it (run.decode_loop)."""
        return {"attention": ATTENTION, "decode_loop": self.decode_loop}

    def loss(self, spec: TaskSpec) -> Any:
        """Label-smoothed cross-entropy over the non-padding target tokens."""
        return functools.partial(label_smoothed_ce, eps=spec.loss_args["smoothing"])
