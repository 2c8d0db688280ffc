"""Transformer (Vaswani et al. 2017, post-norm) written from Gluon HybridBlocks, equal to the torch one.

gluonnlp 0.10's NMTModel differs (60,519,680 trainable parameters at base size, and gluonnlp needs
distutils), so the blocks are written here; dlbench.workloads.translation.transformer holds what the three backends
share. Inside, the network is time-major (T, B, C) because MXNet's fused attention works on that
layout: `interleaved_matmul_selfatt_qk/valatt` (self-attention from one projected q/k/v tensor) and
`interleaved_matmul_encdec_qk/valatt` (cross-attention, and cached self-attention while decoding).
They expect the heads interleaved, [q_h0 k_h0 v_h0 q_h1 ...], so `load_neutral` permutes the rows of
the neutral [q; k; v] and [k; v] matrices. MXNet 1.9.1 runs them on the CPU in float32 only ("Only FP32
is supported on CPU at the moment"); `fused_attention=False` computes the same attention with
batch_dot + softmax (what the bench must pick on a CPU at reduced precision); `attention_impl(model)`
names the one in use. Masks are additive biases (-1e9 on padded source keys and on future target
keys); sequences are right-padded with PAD.
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any

import numpy as np

from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.family import MXNetFamily
from dlbench.core.spec import TaskSpec
from dlbench.workloads.translation.spec import TranslationConfig, model_size
from dlbench.workloads.translation.transformer import (
    LABEL_SMOOTHING,
    PAD,
    TransformerSize,
    greedy_decode,
    weight_shapes,
)

nn = mx.gluon.nn
HybridBlock = mx.gluon.HybridBlock
NEG = -1e9
FUSED = "mxnet.contrib.interleaved_matmul_selfatt/encdec"
UNFUSED = "mxnet.batch_dot+softmax"


def _dense(units: int, in_units: int) -> Any:
    return nn.Dense(units, flatten=False, in_units=in_units, weight_initializer=mx.init.Xavier())


def _heads_first(F: Any, x: Any, heads: int) -> Any:
    """(T, B, H*D) -> (B*H, T, D)."""
    return F.reshape(F.transpose(F.reshape(x, (0, 0, heads, -1)), (1, 2, 0, 3)), (-3, -2))


def _time_first(F: Any, x: Any, heads: int) -> Any:
    """(B*H, T, D) -> (T, B, H*D)."""
    return F.reshape(F.transpose(F.reshape(x, (-4, -1, heads, -2)), (2, 0, 1, 3)), (0, 0, -3))


def _unpack(F: Any, packed: Any, heads: int, parts: int, begin: int, end: int) -> Any:
    """Parts [begin, end) of a head-interleaved (T, B, H*parts*D) tensor, still interleaved."""
    x = F.slice_axis(F.reshape(packed, (0, 0, heads, parts, -1)), axis=3, begin=begin, end=end)
    return F.reshape(x, (0, 0, -1))


def _softmax(F: Any, scores: Any, heads: int, key_bias: Any, causal: Any) -> Any:
    """Softmax over keys of (B*H, Tq, Tk) scores plus a (B, 1, 1, Tk) key bias and/or a (Tq, Tk) causal one."""
    if key_bias is not None:
        scores = F.reshape(F.broadcast_add(F.reshape(scores, (-4, -1, heads, -2)), key_bias), (-3, -2))
    if causal is not None:
        scores = F.broadcast_add(scores, F.expand_dims(causal, 0))
    return F.softmax(scores, axis=-1)


def _attend(
    F: Any, q: Any, kv: Any, heads: int, head_dim: int, fused: bool, key_bias: Any = None, causal: Any = None
) -> Any:
    """q (Tq, B, H*D) against head-interleaved keys/values (Tk, B, H*2*D) -> (Tq, B, H*D)."""
    if fused:
        att = _softmax(F, F.contrib.interleaved_matmul_encdec_qk(q, kv, heads=heads), heads, key_bias, causal)
        return F.contrib.interleaved_matmul_encdec_valatt(kv, att, heads=heads)
    qh = _heads_first(F, q * (1.0 / math.sqrt(head_dim)), heads)
    kh, vh = (_heads_first(F, _unpack(F, kv, heads, 2, i, i + 1), heads) for i in (0, 1))
    att = _softmax(F, F.batch_dot(qh, kh, transpose_b=True), heads, key_bias, causal)
    return _time_first(F, F.batch_dot(att, vh), heads)


class _SelfAttention(HybridBlock):
    def __init__(self, d: int, heads: int, fused: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.heads, self.head_dim, self.fused = heads, d // heads, fused
        with self.name_scope():
            self.qkv = _dense(3 * d, d)
            self.out = _dense(d, d)

    def hybrid_forward(self, F: Any, x: Any, key_bias: Any = None, causal: Any = None) -> Any:
        qkv, h = self.qkv(x), self.heads
        if self.fused:
            att = _softmax(F, F.contrib.interleaved_matmul_selfatt_qk(qkv, heads=h), h, key_bias, causal)
            return self.out(F.contrib.interleaved_matmul_selfatt_valatt(qkv, att, heads=h))
        q, kv = _unpack(F, qkv, h, 3, 0, 1), _unpack(F, qkv, h, 3, 1, 3)
        return self.out(_attend(F, q, kv, h, self.head_dim, False, key_bias, causal))

    def step(self, x: Any, cache: dict) -> Any:
        """One new position (1, B, d) against the cached keys/values, which it extends (imperative)."""
        qkv, h = self.qkv(x), self.heads
        kv = _unpack(mx.nd, qkv, h, 3, 1, 3)
        cache["kv"] = mx.nd.concat(cache["kv"], kv, dim=0) if "kv" in cache else kv
        q = _unpack(mx.nd, qkv, h, 3, 0, 1)
        return self.out(_attend(mx.nd, q, cache["kv"], h, self.head_dim, self.fused))


class _CrossAttention(HybridBlock):
    def __init__(self, d: int, heads: int, fused: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.heads, self.head_dim, self.fused = heads, d // heads, fused
        with self.name_scope():
            self.q = _dense(d, d)
            self.kv = _dense(2 * d, d)
            self.out = _dense(d, d)

    def hybrid_forward(self, F: Any, x: Any, kv: Any, key_bias: Any) -> Any:
        return self.out(_attend(F, self.q(x), kv, self.heads, self.head_dim, self.fused, key_bias))


def _norm(d: int) -> Any:
    return nn.LayerNorm(epsilon=1e-5, in_channels=d)


class _EncoderLayer(HybridBlock):
    def __init__(self, d: int, heads: int, ffn: int, dropout: float, fused: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.self_attn = _SelfAttention(d, heads, fused, prefix="self_attn_")
            self.norm1, self.norm2 = _norm(d), _norm(d)
            self.ff1, self.ff2 = _dense(ffn, d), _dense(d, ffn)
            self.drop = nn.Dropout(dropout)

    def hybrid_forward(self, F: Any, x: Any, key_bias: Any) -> Any:
        x = self.norm1(x + self.drop(self.self_attn(x, key_bias)))
        return self.norm2(x + self.drop(self.ff2(F.relu(self.ff1(x)))))


class _DecoderLayer(HybridBlock):
    def __init__(self, d: int, heads: int, ffn: int, dropout: float, fused: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.self_attn = _SelfAttention(d, heads, fused, prefix="self_attn_")
            self.cross_attn = _CrossAttention(d, heads, fused, prefix="cross_attn_")
            self.norm1, self.norm2, self.norm3 = _norm(d), _norm(d), _norm(d)
            self.ff1, self.ff2 = _dense(ffn, d), _dense(d, ffn)
            self.drop = nn.Dropout(dropout)

    def _rest(self, F: Any, x: Any, memory_kv: Any, src_bias: Any) -> Any:
        x = self.norm2(x + self.drop(self.cross_attn(x, memory_kv, src_bias)))
        return self.norm3(x + self.drop(self.ff2(F.relu(self.ff1(x)))))

    def hybrid_forward(self, F: Any, x: Any, memory_kv: Any, src_bias: Any, causal: Any) -> Any:
        x = self.norm1(x + self.drop(self.self_attn(x, None, causal)))
        return self._rest(F, x, memory_kv, src_bias)

    def step(self, x: Any, memory_kv: Any, src_bias: Any, cache: dict) -> Any:
        x = self.norm1(x + self.drop(self.self_attn.step(x, cache)))
        return self._rest(mx.nd, x, memory_kv, src_bias)


class Transformer(HybridBlock):
    """Encoder-decoder with a shared vocabulary; the output projection is the (tied) embedding, a
    parameter of this block so that both uses see it in a hybridized graph."""

    def __init__(
        self,
        vocab: int,
        d_model: int,
        heads: int,
        ffn: int,
        encoder_layers: int,
        decoder_layers: int,
        dropout: float = 0.1,
        fused_attention: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec = TransformerSize(d_model, heads, ffn, encoder_layers, decoder_layers, vocab, dropout)
        self.fused_attention = fused_attention
        with self.name_scope():
            self.embed_weight = self.params.get(
                "embed_weight", shape=(vocab, d_model), init=mx.init.Normal(d_model**-0.5)
            )
            layer_args = (d_model, heads, ffn, dropout, fused_attention)
            self.enc = nn.HybridSequential(prefix="enc_")
            self.dec = nn.HybridSequential(prefix="dec_")
            with self.enc.name_scope():
                for i in range(encoder_layers):
                    self.enc.add(_EncoderLayer(*layer_args, prefix=f"{i}_"))
            with self.dec.name_scope():
                for i in range(decoder_layers):
                    self.dec.add(_DecoderLayer(*layer_args, prefix=f"{i}_"))
            self.drop = nn.Dropout(dropout)

    def _positions(self, F: Any, ids_tb: Any, x: Any, start: int = 0) -> Any:
        """Sinusoid positions (T, d) for time-major ids, computed in the graph (a constant Parameter
        would count as a weight in the parameter count and the precision probe; F.arange has no input,
        which AMP cannot wrap): PE[pos, j] = sin or cos (j even / odd) of pos * 10000^(-2*(j//2)/d), as
        dlbench.workloads.translation.transformer.sinusoid_positions. `x` is the (T, B, d) embedding, for its d axis."""
        d = self.spec.d_model
        pos = F.cast(F.contrib.arange_like(ids_tb, axis=0, start=float(start)), "float32")
        j = F.cast(F.contrib.arange_like(x, axis=2), "float32")
        odd = F.broadcast_mod(j, F.ones_like(j) * 2.0)
        angle = F.broadcast_mul(
            F.expand_dims(pos, 1), F.expand_dims(F.exp((j - odd) * (-math.log(10000.0) / d)), 0)
        )
        odd = F.expand_dims(odd, 0)
        return F.broadcast_mul(F.sin(angle), 1.0 - odd) + F.broadcast_mul(F.cos(angle), odd)

    def _embed(self, F: Any, ids_tb: Any, weight: Any, start: int = 0) -> Any:
        """Time-major ids (T, B) -> (T, B, d): scaled embedding + positions from `start`."""
        x = F.Embedding(ids_tb, weight, input_dim=self.spec.vocab, output_dim=self.spec.d_model)
        pe = F.expand_dims(self._positions(F, ids_tb, x, start), 1)
        return self.drop(F.broadcast_add(x * math.sqrt(self.spec.d_model), pe))

    def _encode(self, F: Any, src: Any, weight: Any) -> tuple[Any, Any]:
        src_bias = F.expand_dims(F.expand_dims(F.cast(src == PAD, "float32") * NEG, 1), 1)  # (B, 1, 1, S)
        src_tb = F.transpose(src)
        x = self._embed(F, src_tb, weight)
        for layer in self.enc:
            x = layer(x, src_bias)
        return x, src_bias

    def _logits(self, F: Any, x_tb: Any, weight: Any) -> Any:
        """(T, B, d) -> batch-major logits (B, T, vocab)."""
        x = F.transpose(x_tb, (1, 0, 2))
        return F.FullyConnected(x, weight, no_bias=True, num_hidden=self.spec.vocab, flatten=False)

    def hybrid_forward(self, F: Any, src: Any, tgt_in: Any, embed_weight: Any) -> Any:
        """Teacher-forced logits (B, T, vocab) for batch-major (src, tgt_in = [BOS] + target, padded)."""
        memory, src_bias = self._encode(F, src, embed_weight)
        tgt_tb = F.transpose(tgt_in)
        pos = F.contrib.arange_like(tgt_tb, axis=0)
        future = F.broadcast_greater(F.expand_dims(pos, 0), F.expand_dims(pos, 1))
        causal = F.cast(future, "float32") * NEG  # (T, T): -1e9 where the key is after the query
        x = self._embed(F, tgt_tb, embed_weight)
        for layer in self.dec:
            x = layer(x, layer.cross_attn.kv(memory), src_bias, causal)
        return self._logits(F, x, embed_weight)

    def translate(self, src: Any, max_len: int, check_every: int = 1, read_back: bool = True) -> Any:
        """Greedy decoding with cached keys/values (dlbench.workloads.translation.transformer.greedy_decode's loop);
        the tokens stay on the device, and with `read_back=False` are returned there (an NDArray)."""
        ctx = src.context
        weight = self.embed_weight.data(ctx)
        memory, src_bias = self._encode(mx.nd, src, weight)
        cross = [layer.cross_attn.kv(memory) for layer in self.dec]
        caches: list[dict] = [{} for _ in self.dec]

        def step(prev: Any, t: int) -> Any:
            x = self._embed(mx.nd, prev.reshape((1, -1)), weight, t)
            for layer, kv, cache in zip(self.dec, cross, caches, strict=True):
                x = layer.step(x, kv, src_bias, cache)
            return self._logits(mx.nd, x, weight)[:, 0].argmax(axis=-1).astype("int32")

        with warnings.catch_warnings():
            # a hybridized cross-attention called alone does not use its kv projection (done once above)
            warnings.filterwarnings("ignore", r"Parameter .*cross_attn.* is not used", UserWarning)
            return greedy_decode(step, src.shape[0], max_len, MXNetOps(ctx), check_every, read_back=read_back)


class MXNetOps:
    """dlbench.workloads.translation.transformer.DecodeOps on NDArrays of one context (flags are int32 0/1)."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    def full(self, n: int, value: int) -> Any:
        return mx.nd.full((n,), value, ctx=self.ctx, dtype="int32")

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return mx.nd.where(cond, a, b)

    def equal(self, a: Any, value: int) -> Any:
        return a == value

    def logical_or(self, a: Any, b: Any) -> Any:
        return mx.nd.maximum(a, b)

    def all(self, a: Any) -> bool:
        return bool(a.min().asscalar())

    def stack(self, columns: list[Any]) -> Any:
        return mx.nd.stack(*columns, axis=1)

    def to_numpy(self, ids: Any) -> np.ndarray:
        return ids.asnumpy().astype(np.int32)


def build_transformer(fused_attention: bool = True, ctx: Any = None, **size: Any) -> Transformer:
    """The network of `dlbench.workloads.translation.transformer.TransformerSize.kwargs()`, initialized on ctx."""
    model = Transformer(fused_attention=fused_attention, **size)
    model.initialize(ctx=ctx or mx.cpu())
    return model


def fused_attention_runs() -> bool:
    """Whether the interleaved attention ops can run the network: MXNet 1.9.1 has them in float16/float32
    on a GPU but in float32 only on the CPU, where AMP (already initialized by the bench, before the
    build) means bfloat16."""
    amp = sys.modules.get("mxnet.contrib.amp.amp")
    return not (amp is not None and amp._amp_initialized) or mx.context.num_gpus() > 0


def build_model(cfg: TranslationConfig, train: bool = True) -> Transformer:
    """The bench's entry (backends/skeleton.load_family), uninitialized; an inference network is built
    without dropout (MXNet has no bfloat16 Dropout kernel, and it is the identity there anyway)."""
    size = model_size(cfg)
    kwargs = {**size.kwargs(), "dropout": size.dropout if train else 0.0}
    return Transformer(fused_attention=fused_attention_runs(), **kwargs)


def initialize(net: Transformer, cfg: TranslationConfig, ctx: Any) -> None:
    net.initialize(ctx=ctx)


def infer(net: Transformer, inputs: tuple) -> Any:
    """The inference step: greedy decoding of every sentence for as many steps as the target side is
    long (no early stop: every framework does the same work; workloads/translation/source.py counts it);
    the ids are left on the device (greedy_decode says why)."""
    src, tgt_in = inputs
    return net.translate(src, tgt_in.shape[1], check_every=0, read_back=False)


def run_facts(net: Transformer) -> dict[str, str]:
    return {"attention": attention_impl(net)}


def attention_impl(model: Transformer) -> str:
    """Which attention kernels the model runs, for the run's tags."""
    return FUSED if model.fused_attention else UNFUSED


def label_smoothed_ce(F: Any, logits: Any, labels: Any, eps: float = LABEL_SMOOTHING) -> Any:
    """Mean over non-pad labels of (1 - eps) * NLL + eps * mean over the vocabulary of -log p, in float32
    (the torch and Keras losses are the same formula). F is mx.nd or mx.sym."""
    logp = F.log_softmax(F.cast(logits, "float32"), axis=-1)
    nll = -F.pick(logp, labels, axis=-1)
    per_token = (1.0 - eps) * nll - eps * F.mean(logp, axis=-1)
    keep = F.cast(labels != PAD, "float32")
    return F.sum(per_token * keep) / F.maximum(F.sum(keep), 1.0)


class LabelSmoothedCE(HybridBlock):
    """The loss kind `label_smoothed_cross_entropy` for the bench: the batch's mean over its target
    tokens, already normalized (the family's `loss_averaged`: the bench steps the trainer with 1, not the
    batch size)."""

    def __init__(self, eps: float = LABEL_SMOOTHING, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.eps = eps

    def hybrid_forward(self, F: Any, logits: Any, labels: Any) -> Any:
        return label_smoothed_ce(F, logits, labels, self.eps)


def _interleave(w: np.ndarray, heads: int, parts: int) -> np.ndarray:
    """Rows [part0; part1; ...] (each heads*D) -> per head [part0_h; part1_h; ...] (MXNet's layout)."""
    rows = w.shape[0] // parts
    blocks = w.reshape(parts, heads, rows // heads, *w.shape[1:])
    return np.swapaxes(blocks, 0, 1).reshape(w.shape)


def _deinterleave(w: np.ndarray, heads: int, parts: int) -> np.ndarray:
    blocks = w.reshape(heads, parts, w.shape[0] // (heads * parts), *w.shape[1:])
    return np.swapaxes(blocks, 0, 1).reshape(w.shape)


def _parameters(model: Transformer) -> dict[str, tuple[Any, int]]:
    """Neutral name -> (Gluon Parameter, interleaved parts: 3 for self-attention qkv, 2 for kv, else 0)."""
    out: dict[str, tuple[Any, int]] = {}
    for name in weight_shapes(model.spec):
        if name == "embed.weight":
            out[name] = (model.embed_weight, 0)
            continue
        *path, leaf = name.split(".")
        obj: Any = model
        for part in path:
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        if isinstance(obj, nn.LayerNorm):
            leaf = {"weight": "gamma", "bias": "beta"}[leaf]
        parts = {"qkv": 3, "kv": 2}.get(path[-1], 0)
        out[name] = (getattr(obj, leaf), parts)
    return out


def load_neutral(model: Transformer, weights: dict[str, np.ndarray]) -> None:
    """Copy framework-neutral weights (dlbench.workloads.translation.transformer.weight_shapes names) into the model."""
    params = _parameters(model)
    if set(weights) != set(params):
        raise KeyError(f"weights differ from the model's: {sorted(set(weights) ^ set(params))[:5]}")
    for name, (param, parts) in params.items():
        w = np.asarray(weights[name])
        param.set_data(_interleave(w, model.spec.heads, parts) if parts else w)


def neutral_weights(model: Transformer) -> dict[str, np.ndarray]:
    out = {}
    for name, (param, parts) in _parameters(model).items():
        w = param.data().asnumpy()
        out[name] = _deinterleave(w, model.spec.heads, parts) if parts else w
    return out


def trainable_count(model: Transformer) -> int:
    return sum(int(np.prod(p.shape)) for p in model.collect_params().values() if p.grad_req != "null")


class TranslationMXNet(MXNetFamily):
    """The Transformer (greedy decoding for inference, label-smoothed cross-entropy), in MXNet."""

    loss_averaged = True  # LabelSmoothedCE is already the mean over the batch's target tokens

    build_model = staticmethod(build_model)
    initialize = staticmethod(initialize)
    infer = staticmethod(infer)
    run_facts = staticmethod(run_facts)
    export_weights = staticmethod(neutral_weights)
    load_weights = staticmethod(load_neutral)

    def loss(self, spec: TaskSpec) -> Any:
        """Label-smoothed cross-entropy over the non-padding target tokens."""
        return LabelSmoothedCE(spec.loss_args["smoothing"])
