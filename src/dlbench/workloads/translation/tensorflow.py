"""Transformer (Vaswani et al. 2017, post-norm) written from Keras 3 layers, equal to the torch one.

keras-hub's TransformerEncoder/Decoder would give the same count, but not the same computation
(keras-hub fuses nothing and orders the decoder's dropout differently) and not the same weight names;
writing the blocks here makes the three backends one network (dlbench.workloads.translation.transformer holds what they
share). Attention is `keras.ops.dot_product_attention` (on TensorFlow it runs the XLA/cuDNN fused
kernel where there is one, softmax(QK^T)V otherwise). LayerNormalization uses epsilon 1e-5 as torch
and MXNet do (Keras' default is 1e-3). Dense kernels are (in, out): the transpose of the neutral
(out, in) weights.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import layers, ops

from dlbench.backends.tensorflow.family import TFFamily
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

ATTENTION = "keras.ops.dot_product_attention"
MAX_POSITIONS = 1024
LN_EPS = 1e-5


def _dense(units: int, name: str) -> layers.Dense:
    return layers.Dense(units, kernel_initializer="glorot_uniform", bias_initializer="zeros", name=name)


def _heads(x: Any, heads: int) -> Any:
    """(B, T, H*D) -> (B, T, H, D), the layout dot_product_attention takes."""
    shape = ops.shape(x)
    return ops.reshape(x, (shape[0], shape[1], heads, -1))


def _merge(x: Any) -> Any:
    shape = ops.shape(x)
    return ops.reshape(x, (shape[0], shape[1], -1))


class _SelfAttention(layers.Layer):
    def __init__(self, d: int, heads: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.heads = heads
        self.qkv = _dense(3 * d, "qkv")
        self.out = _dense(d, "out")

    def call(self, x: Any, keep: Any, causal: bool) -> Any:
        """keep: bool (B, 1, 1, S) key mask or None."""
        q, k, v = (_heads(p, self.heads) for p in ops.split(self.qkv(x), 3, axis=-1))
        return self.out(_merge(ops.dot_product_attention(q, k, v, mask=keep, is_causal=causal)))

    def step(self, x: Any, k_cache: Any, v_cache: Any) -> tuple[Any, Any, Any]:
        """One new position (B, 1, d) against the cached keys/values (B, t, H, D): (output, keys, values)
        extended by this position. Pure (no state), so the decoding step can be one tf.function."""
        q, k, v = (_heads(p, self.heads) for p in ops.split(self.qkv(x), 3, axis=-1))
        k, v = ops.concatenate([k_cache, k], 1), ops.concatenate([v_cache, v], 1)
        return self.out(_merge(ops.dot_product_attention(q, k, v))), k, v

    def step_at(self, x: Any, t: Any, k_cache: Any, v_cache: Any) -> tuple[Any, Any, Any]:
        """`step` on fixed-length caches (B, max_len, H, D): this position's keys/values written at t,
        positions after t masked out. One shape for every step, so XLA compiles the step once; the
        masked positions add attention work over max_len keys, small beside the feed-forward blocks.
        The write is a masked blend over positions (cache * (1 - put) + new * put, exact for put in {0, 1}),
        as the hand-written decoder (yardsticks/bare_tf_transformer.py) writes it. Not a slice update: TF does
        not donate an XLA function's inputs, so a slice update of an input cache first copies the whole
        cache (two more device copies per layer and position). Not a select either: inside the one-call
        decode's while loop XLA fused a select into both of its readers (the attention and the carried
        cache), which then needed a copy of the old cache in every iteration (12 cache copies per
        position in the optimized HLO, none with the blend)."""
        q, k, v = (_heads(p, self.heads) for p in ops.split(self.qkv(x), 3, axis=-1))
        at = ops.arange(ops.shape(k_cache)[1])
        put = ops.cast(at == t, k.dtype)[None, :, None, None]
        k_cache, v_cache = k_cache * (1 - put) + k * put, v_cache * (1 - put) + v * put
        seen = (at <= t)[None, None, None, :]
        y = ops.dot_product_attention(q, k_cache, v_cache, mask=seen)
        return self.out(_merge(y)), k_cache, v_cache


class _CrossAttention(layers.Layer):
    def __init__(self, d: int, heads: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.heads = heads
        self.q = _dense(d, "q")
        self.kv = _dense(2 * d, "kv")
        self.out = _dense(d, "out")

    def keys_values(self, memory: Any) -> tuple[Any, Any]:
        k, v = ops.split(self.kv(memory), 2, axis=-1)
        return _heads(k, self.heads), _heads(v, self.heads)

    def call(self, x: Any, kv: tuple[Any, Any], keep: Any) -> Any:
        y = ops.dot_product_attention(_heads(self.q(x), self.heads), *kv, mask=keep)
        return self.out(_merge(y))


def _norm(name: str) -> layers.LayerNormalization:
    return layers.LayerNormalization(epsilon=LN_EPS, name=name)


class _EncoderLayer(layers.Layer):
    def __init__(self, d: int, heads: int, ffn: int, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.self_attn = _SelfAttention(d, heads, name="self_attn")
        self.norm1, self.norm2 = _norm("norm1"), _norm("norm2")
        self.ff1, self.ff2 = _dense(ffn, "ff1"), _dense(d, "ff2")
        self.drop = layers.Dropout(dropout)

    def call(self, x: Any, keep: Any, training: bool = False) -> Any:
        x = self.norm1(x + self.drop(self.self_attn(x, keep, causal=False), training=training))
        return self.norm2(x + self.drop(self.ff2(ops.relu(self.ff1(x))), training=training))


class _DecoderLayer(layers.Layer):
    def __init__(self, d: int, heads: int, ffn: int, dropout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.self_attn = _SelfAttention(d, heads, name="self_attn")
        self.cross_attn = _CrossAttention(d, heads, name="cross_attn")
        self.norm1, self.norm2, self.norm3 = _norm("norm1"), _norm("norm2"), _norm("norm3")
        self.ff1, self.ff2 = _dense(ffn, "ff1"), _dense(d, "ff2")
        self.drop = layers.Dropout(dropout)

    def _rest(self, x: Any, kv: Any, src_keep: Any, training: bool) -> Any:
        x = self.norm2(x + self.drop(self.cross_attn(x, kv, src_keep), training=training))
        return self.norm3(x + self.drop(self.ff2(ops.relu(self.ff1(x))), training=training))

    def call(self, x: Any, kv: Any, src_keep: Any, training: bool = False) -> Any:
        x = self.norm1(x + self.drop(self.self_attn(x, None, causal=True), training=training))
        return self._rest(x, kv, src_keep, training)

    def step(self, x: Any, kv: Any, src_keep: Any, k_cache: Any, v_cache: Any) -> tuple[Any, Any, Any]:
        y, k, v = self.self_attn.step(x, k_cache, v_cache)
        return self._rest(self.norm1(x + y), kv, src_keep, False), k, v

    def step_at(self, x: Any, t: Any, kv: Any, src_keep: Any, k_cache: Any, v_cache: Any) -> tuple:
        y, k, v = self.self_attn.step_at(x, t, k_cache, v_cache)
        return self._rest(self.norm1(x + y), kv, src_keep, False), k, v


class Transformer(keras.Model):
    """Encoder-decoder with a shared vocabulary; the output projection is the (tied) embedding."""

    def __init__(
        self,
        vocab: int,
        d_model: int,
        heads: int,
        ffn: int,
        encoder_layers: int,
        decoder_layers: int,
        dropout: float = 0.1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec = TransformerSize(d_model, heads, ffn, encoder_layers, decoder_layers, vocab, dropout)
        self.d_model = d_model
        init = keras.initializers.RandomNormal(stddev=d_model**-0.5)
        self.embed = layers.Embedding(vocab, d_model, embeddings_initializer=init, name="embed")
        self.pe = sinusoid_positions(MAX_POSITIONS, d_model)
        self.enc = [
            _EncoderLayer(d_model, heads, ffn, dropout, name=f"enc_{i}") for i in range(encoder_layers)
        ]
        self.dec = [
            _DecoderLayer(d_model, heads, ffn, dropout, name=f"dec_{i}") for i in range(decoder_layers)
        ]
        self.drop = layers.Dropout(dropout)
        self._decode_fns: dict[
            bool, tuple
        ] = {}  # XLA or not -> (encode, step) tf.functions, made on first use
        self._decode_all_fn: Any = (
            None  # the whole decode as one XLA function (loop="device"), made on first use
        )
        self.decode_jit_compile = False  # `infer` decodes with XLA (TranslationTF.compile_infer)
        self.decode_loop = "host"  # `infer`'s model.decode_loop (build_model)

    def _embed(self, ids: Any, start: int = 0, training: bool = False) -> Any:
        x = self.embed(ops.cast(ids, "int64"))  # int64: see `encode`
        pe = ops.cast(ops.convert_to_tensor(self.pe)[start : start + ops.shape(ids)[1]], x.dtype)  # dynamic T
        return self.drop(x * math.sqrt(self.d_model) + pe, training=training)

    def encode(self, src: Any, training: bool = False) -> tuple[Any, Any]:
        """The encoder's output and its source mask. Ids are compared and looked up as int64: TF's GPU
        kernels of int32 comparisons and arithmetic (Keras's negative-index fix-up in every lookup among them)
        keep their tensors in host memory, so outside XLA int32 ids went to the host and back every step."""
        keep = ops.not_equal(ops.cast(src, "int64"), PAD)[:, None, None, :]
        x = self._embed(src, training=training)
        for layer in self.enc:
            x = layer(x, keep, training=training)
        return x, keep

    def _logits(self, x: Any) -> Any:
        return ops.matmul(x, ops.transpose(ops.cast(self.embed.embeddings, x.dtype)))

    def call(self, inputs: tuple[Any, Any], training: bool = False) -> Any:
        """Teacher-forced logits (B, T, vocab) for (src, tgt_in = [BOS] + target, padded)."""
        src, tgt_in = inputs
        memory, keep = self.encode(src, training)
        x = self._embed(tgt_in, training=training)
        for layer in self.dec:
            x = layer(x, layer.cross_attn.keys_values(memory), keep, training=training)
        return self._logits(x)

    def _decode_step(
        self, prev: Any, t: Any, caches: list, cross: list, keep: Any, fixed: bool = False
    ) -> tuple[Any, list]:
        """Decoder at position t for the previous tokens: (argmax ids, caches with position t), the caches
        grown by concatenation, or (`fixed`, the XLA path) fixed-length ones written at t. The position's
        encoding is gathered at t (`_embed_at`) on both paths: a slice starting at a tensor has an unknown
        length, and every Dense after it would then reshape through dynamic shapes (about 490 more graph
        ops per position, which a host-bound graph-mode decode pays for). The argmax is tf.argmax:
        keras.ops.argmax first rewrites -0.0 in the float32-cast logits with an int32 bitwise test, which
        TF ran on the host, copying (B, vocab) values off the GPU and back at every position (about 15% of
        a graph-mode decode on an H200); a tie of 0.0 and -0.0 does not matter to a greedy choice. The ids
        are int64 from the argmax on, as in `encode`: the slice, fill, EOS test and output of a position on
        int32 ids have host-memory GPU kernels, so each position would copy them to the host."""
        x = self._embed_at(prev[:, None], t)
        grown = []
        for layer, kv, (k, v) in zip(self.dec, cross, caches, strict=True):
            x, k, v = layer.step_at(x, t, kv, keep, k, v) if fixed else layer.step(x, kv, keep, k, v)
            grown.append((k, v))
        return tf.argmax(self._logits(x[:, 0]), axis=-1, output_type=tf.int64), grown

    def _decode_position(
        self, prev: Any, done: Any, t: Any, caches: list, cross: list, keep: Any, fixed: bool
    ) -> tuple[Any, Any, list]:
        """One position of greedy decoding in one call: (ids with PAD after EOS, done, caches)."""
        ids, grown = self._decode_step(prev, t, caches, cross, keep, fixed)
        ids = ops.where(done, ops.full_like(ids, PAD), ids)
        return ids, ops.logical_or(done, ops.equal(ids, EOS)), grown

    def _embed_at(self, ids: Any, t: Any) -> Any:
        """The embedding of one position t given as a tensor (XLA wants a static slice size)."""
        x = self.embed(ops.cast(ids, "int64"))  # int64: see `encode`
        pe = ops.cast(ops.take(ops.convert_to_tensor(self.pe), t[None], axis=0), x.dtype)
        return x * math.sqrt(self.d_model) + pe[None]

    def _encode_for_decoding(self, src: Any) -> tuple[Any, list]:
        memory, keep = self.encode(src)
        return keep, [layer.cross_attn.keys_values(memory) for layer in self.dec]

    def _decode_all(self, src: Any, max_len: int) -> Any:
        """Every position of greedy decoding in one function (loop="device"): the encoder, then a
        tf.while_loop over the positions, each one `_decode_position` over fixed-length caches, its ids
        written into a (B, max_len) buffer with a select. XLA compiles it into one program, so the host
        launches it once per batch instead of once per position."""
        keep, cross = self._encode_for_decoding(src)
        batch, heads = ops.shape(src)[0], self.spec.heads
        empty = ops.zeros((batch, max_len, heads, self.spec.d_model // heads), dtype=cross[0][0].dtype)
        at = tf.range(max_len)

        def body(t: Any, prev: Any, done: Any, caches: list, out: Any) -> tuple:
            ids, done, caches = self._decode_position(prev, done, t, caches, cross, keep, True)
            return t + 1, ids, done, caches, tf.where((at == t)[None, :], ids[:, None], out)

        start = (
            tf.constant(0),
            tf.fill([batch], tf.constant(BOS, tf.int64)),
            tf.zeros([batch], tf.bool),
            [(empty, empty) for _ in self.dec],
            tf.zeros([batch, max_len], tf.int64),
        )
        return tf.while_loop(lambda t, *_: t < max_len, body, start, maximum_iterations=max_len)[-1]

    def decode_on_device(self, src: Any, max_len: int) -> Any:
        """Every position of greedy decoding in one XLA call (`_decode_all`): the (B, max_len) ids, PAD after
        EOS, left on the device. Nothing waits for them: the host can launch the next batch's decode while
        this one runs, as a hand-written loop does; whoever uses the ids reads them back."""
        if self._decode_all_fn is None:
            self._decode_all_fn = tf.function(self._decode_all, jit_compile=True, reduce_retracing=True)
        return self._decode_all_fn(src, max_len)

    def translate(
        self,
        src: Any,
        max_len: int,
        check_every: int = 1,
        jit_compile: bool = False,
        loop: str = "host",
        read_back: bool = True,
    ) -> Any:
        """Greedy decoding with cached keys/values (dlbench.workloads.translation.transformer.greedy_decode's
        loop, fused: PAD after EOS inside the step, one call per position); the tokens stay on the device.
        Without XLA the encoder is one tf.function (as the yardstick's; run eagerly it cost about 4x its
        traced time on a CPU) and the step a tf.function over caches that grow (traced for the first two
        cache lengths, then once more with a relaxed length: reduce_retracing). With `jit_compile` the encoder
        and the step are XLA-compiled, the step over fixed-length caches (one shape, one compilation):
        the same tokens. `loop="device"` (XLA only) decodes every position in one XLA call (`_decode_all`):
        no early stop, the same tokens once the PAD columns are cut, as the host loop cuts them.
        Returns numpy ids without the PAD columns; `read_back=False` (the bench's inference step) leaves
        the uncut (B, steps) ids on the device (greedy_decode says why)."""
        if loop == "device":
            if not jit_compile:
                raise ValueError("loop='device' decodes in one XLA call: it needs jit_compile=True")
            ids = self.decode_on_device(src, max_len)
            return trim_padding(KerasOps().to_numpy(ids)) if read_back else ids
        s, heads = self.spec, self.spec.heads
        if jit_compile not in self._decode_fns:
            xla = True if jit_compile else None  # None: TF's default (no XLA unless auto-clustering is on)
            self._decode_fns[jit_compile] = (
                tf.function(self._encode_for_decoding, jit_compile=xla, reduce_retracing=True),
                tf.function(
                    functools.partial(self._decode_position, fixed=jit_compile),
                    jit_compile=xla,
                    reduce_retracing=True,
                ),
            )
        encode, step_fn = self._decode_fns[jit_compile]
        keep, cross = encode(src)
        length = max_len if jit_compile else 0  # fixed-length caches under XLA, grown ones otherwise
        dtype = cross[0][0].dtype
        empty = ops.zeros((ops.shape(src)[0], length, heads, s.d_model // heads), dtype=dtype)
        caches = [(empty, empty) for _ in self.dec]

        def step(prev: Any, done: Any, t: int) -> tuple[Any, Any]:
            nonlocal caches
            ids, done, caches = step_fn(prev, done, tf.constant(t), caches, cross, keep)
            return ids, done

        batch = int(src.shape[0])
        return greedy_decode(step, batch, max_len, KerasOps(), check_every, fused=True, read_back=read_back)


class KerasOps:
    """dlbench.workloads.translation.transformer.DecodeOps on Keras tensors."""

    def full(self, n: int, value: int) -> Any:
        return ops.full((n,), value, dtype="int64")  # int64 ids: see Transformer._decode_step

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return ops.where(cond, a, b)

    def equal(self, a: Any, value: int) -> Any:
        return ops.equal(a, value)

    def logical_or(self, a: Any, b: Any) -> Any:
        return ops.logical_or(a, b)

    def all(self, a: Any) -> bool:
        return bool(ops.convert_to_numpy(ops.all(a)))

    def stack(self, columns: list[Any]) -> Any:
        return ops.stack(columns, axis=1)

    def to_numpy(self, ids: Any) -> np.ndarray:
        return ops.convert_to_numpy(ids).astype(np.int32)


def build_transformer(**size: Any) -> Transformer:
    """The network of `dlbench.workloads.translation.transformer.TransformerSize.kwargs()`, built (weights created)."""
    model = Transformer(**size)
    model((np.full((1, 2), 4, dtype=np.int32), np.full((1, 2), 4, dtype=np.int32)))
    return model


def build_model(cfg: TranslationConfig, float_dtype: str = "float32") -> Transformer:
    """The bench's entry (backends/skeleton.load_family); the inputs are ids, so float_dtype is unused
    (the Keras policy set before the build decides the compute dtype)."""
    model = build_transformer(**model_size(cfg).kwargs())
    model.decode_loop = cfg.decode_loop
    return model


def infer(model: Transformer, inputs: tuple) -> Any:
    """The inference step: greedy decoding of every sentence for as many steps as the target side is
    long (no early stop: every framework does the same work; workloads/translation/source.py counts it).
    The ids are left on the device, as a classifier's step leaves its logits (the bench reads them back
    where they are used: evaluation, serving): a read-back after every batch made the host wait before
    launching the next (about 5% of a one-call decode's time on an H200)."""
    src, tgt_in = inputs
    steps, xla = int(tgt_in.shape[1]), model.decode_jit_compile
    return model.translate(
        src, steps, check_every=0, jit_compile=xla, loop=model.decode_loop, read_back=False
    )


def run_facts(model: Transformer) -> dict[str, str]:
    """The attention kernel, and greedy decoding's loop as the built model runs it (run.decode_loop)."""
    return {"attention": ATTENTION, "decode_loop": model.decode_loop}


def label_smoothed_ce(logits: Any, labels: Any, eps: float = LABEL_SMOOTHING) -> Any:
    """Mean over non-pad labels of (1 - eps) * NLL + eps * mean over the vocabulary of -log p, in float32
    (the torch and Gluon losses are the same formula)."""
    logp = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    labels = ops.cast(labels, "int64")  # int32 would keep them in host memory on a GPU (Transformer.encode)
    nll = -ops.squeeze(ops.take_along_axis(logp, labels[..., None], axis=-1), -1)
    per_token = (1.0 - eps) * nll - eps * ops.mean(logp, axis=-1)
    keep = ops.cast(ops.not_equal(labels, PAD), "float32")
    return ops.sum(per_token * keep) / ops.maximum(ops.sum(keep), 1.0)


def _variables(model: Transformer, names: list[str]) -> dict[str, tuple[Any, bool]]:
    """Neutral name -> (Keras variable, stored transposed?). `enc.0.ff1.weight` is model.enc[0].ff1.kernel."""
    attr = {
        layers.Dense: {"weight": ("kernel", True), "bias": ("bias", False)},
        layers.LayerNormalization: {"weight": ("gamma", False), "bias": ("beta", False)},
        layers.Embedding: {"weight": ("embeddings", False)},
    }
    out = {}
    for name in names:
        *path, leaf = name.split(".")
        obj: Any = model
        for part in path:
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        var_name, transposed = attr[type(obj)][leaf]
        out[name] = (getattr(obj, var_name), transposed)
    return out


def load_neutral(model: Transformer, weights: dict[str, np.ndarray]) -> None:
    """Copy framework-neutral weights (dlbench.workloads.translation.transformer.weight_shapes names) into the model."""
    variables = _variables(model, list(weight_shapes(model.spec)))
    if set(weights) != set(variables):
        raise KeyError(f"weights differ from the model's: {sorted(set(weights) ^ set(variables))[:5]}")
    for name, (var, transposed) in variables.items():
        w = np.asarray(weights[name])
        var.assign(w.T if transposed else w)


def neutral_weights(model: Transformer) -> dict[str, np.ndarray]:
    return {
        name: (np.asarray(var).T if transposed else np.asarray(var))
        for name, (var, transposed) in _variables(model, list(weight_shapes(model.spec))).items()
    }


class TranslationTF(TFFamily):
    """The Transformer (greedy decoding for inference, label-smoothed cross-entropy), in TensorFlow."""

    eager_infer = True  # a host loop over decoder steps: not traced into one tf.function
    build_model = staticmethod(build_model)
    infer = staticmethod(infer)
    run_facts = staticmethod(run_facts)
    export_weights = staticmethod(neutral_weights)
    load_weights = staticmethod(load_neutral)

    def compile_infer(self, model: Transformer, jit_compile: bool) -> None:
        """framework.xla: the encoder and the decoding step are XLA-compiled (the host loop stays), or with
        model.decode_loop=device the whole decode is one XLA call."""
        model.decode_jit_compile = jit_compile

    def loss(self, spec: TaskSpec) -> Any:
        """Label-smoothed cross-entropy over the non-padding target tokens."""
        return functools.partial(label_smoothed_ce, eps=spec.loss_args["smoothing"])
