"""Transformer (Vaswani et al. 2017, post-norm) written from torch's basic layers.

Not `nn.Transformer`: it adds final encoder/decoder norms (60,524,544 parameters at base size, not
60,522,496) and its fused "fast path" fails under CPU bf16 autocast in eval mode in torch 2.14.1; this
network is layer for layer the one in the Keras and Gluon backends (dlbench.workloads.translation.transformer holds what
they share). Attention is F.scaled_dot_product_attention (flash / memory-efficient kernels where the
device has them). Module names equal the framework-neutral weight names, so the state dict *is* the
neutral dict.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dlbench.backends.torch.family import TorchFamily
from dlbench.core.spec import TaskSpec
from dlbench.workloads.translation.spec import TranslationConfig, model_size
from dlbench.workloads.translation.transformer import LABEL_SMOOTHING, PAD, greedy_decode, sinusoid_positions

ATTENTION = "torch.nn.functional.scaled_dot_product_attention"
MAX_POSITIONS = 1024


def _linear(inp: int, out: int) -> nn.Linear:
    layer = nn.Linear(inp, out)
    nn.init.xavier_uniform_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, T, H*D) -> (B, H, T, D)."""
    b, t, _ = x.shape
    return x.view(b, t, heads, -1).transpose(1, 2)


def _merge(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, D) -> (B, T, H*D)."""
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


class _SelfAttention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = _linear(d, 3 * d)
        self.out = _linear(d, d)

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None, causal: bool) -> torch.Tensor:
        """keep: bool (B, 1, 1, S) key mask (True = attend) or None."""
        q, k, v = (_heads(p, self.heads) for p in self.qkv(x).chunk(3, dim=-1))
        return self.out(_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=causal)))

    def step(self, x: torch.Tensor, cache: dict, t: int, max_len: int) -> torch.Tensor:
        """Position t (B, 1, d) against the cached keys/values of positions <= t. The cache is allocated
        once for max_len positions and written in place: extending it by concatenation copied the whole
        cache at every position (quadratic traffic, ~3% of an H200's greedy decoding at 40,960 tokens)."""
        q, k, v = (_heads(p, self.heads) for p in self.qkv(x).chunk(3, dim=-1))
        if t == 0:
            b, h, _, dh = k.shape
            cache["k"], cache["v"] = k.new_empty(b, h, max_len, dh), v.new_empty(b, h, max_len, dh)
        cache["k"][:, :, t : t + 1], cache["v"][:, :, t : t + 1] = k, v
        k, v = cache["k"][:, :, : t + 1], cache["v"][:, :, : t + 1]
        return self.out(_merge(F.scaled_dot_product_attention(q, k, v)))


class _CrossAttention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q = _linear(d, d)
        self.kv = _linear(d, 2 * d)
        self.out = _linear(d, d)

    def keys_values(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = self.kv(memory).chunk(2, dim=-1)
        return _heads(k, self.heads), _heads(v, self.heads)

    def forward(self, x: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor], keep: torch.Tensor):
        y = F.scaled_dot_product_attention(_heads(self.q(x), self.heads), *kv, attn_mask=keep)
        return self.out(_merge(y))


class _EncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = _SelfAttention(d, heads)
        self.norm1 = nn.LayerNorm(d)
        self.ff1, self.ff2 = _linear(d, ffn), _linear(ffn, d)
        self.norm2 = nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.drop(self.self_attn(x, keep, causal=False)))
        return self.norm2(x + self.drop(self.ff2(F.relu(self.ff1(x)))))


class _DecoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = _SelfAttention(d, heads)
        self.norm1 = nn.LayerNorm(d)
        self.cross_attn = _CrossAttention(d, heads)
        self.norm2 = nn.LayerNorm(d)
        self.ff1, self.ff2 = _linear(d, ffn), _linear(ffn, d)
        self.norm3 = nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)

    def _rest(self, x: torch.Tensor, kv: tuple, src_keep: torch.Tensor) -> torch.Tensor:
        x = self.norm2(x + self.drop(self.cross_attn(x, kv, src_keep)))
        return self.norm3(x + self.drop(self.ff2(F.relu(self.ff1(x)))))

    def forward(self, x: torch.Tensor, kv: tuple, src_keep: torch.Tensor) -> torch.Tensor:
        return self._rest(self.norm1(x + self.drop(self.self_attn(x, None, causal=True))), kv, src_keep)

    def step(
        self, x: torch.Tensor, kv: tuple, src_keep: torch.Tensor, cache: dict, t: int, max_len: int
    ) -> torch.Tensor:
        return self._rest(self.norm1(x + self.drop(self.self_attn.step(x, cache, t, max_len))), kv, src_keep)


class Transformer(nn.Module):
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
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.embed.weight, 0.0, d_model**-0.5)
        self.register_buffer("pe", torch.from_numpy(sinusoid_positions(MAX_POSITIONS, d_model)), False)
        self.enc = nn.ModuleList(_EncoderLayer(d_model, heads, ffn, dropout) for _ in range(encoder_layers))
        self.dec = nn.ModuleList(_DecoderLayer(d_model, heads, ffn, dropout) for _ in range(decoder_layers))
        self.drop = nn.Dropout(dropout)

    def _embed(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        x = self.embed(ids) * math.sqrt(self.d_model) + self.pe[start : start + ids.shape[1]]
        return self.drop(x)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keep = (src != PAD)[:, None, None, :]
        x = self._embed(src)
        for layer in self.enc:
            x = layer(x, keep)
        return x, keep

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.embed.weight)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (B, T, vocab) for decoder inputs tgt_in ([BOS] + target, padded)."""
        memory, keep = self.encode(src)
        x = self._embed(tgt_in)
        for layer in self.dec:
            x = layer(x, layer.cross_attn.keys_values(memory), keep)
        return self._logits(x)

    @torch.no_grad()
    def translate(
        self, src: torch.Tensor, max_len: int, check_every: int = 1, read_back: bool = True
    ) -> np.ndarray | torch.Tensor:
        """Greedy decoding with cached keys/values (dlbench.workloads.translation.transformer.greedy_decode's loop);
        the tokens stay on the device, and with `read_back=False` are returned there."""
        memory, keep = self.encode(src)
        cross = [layer.cross_attn.keys_values(memory) for layer in self.dec]
        caches: list[dict] = [{} for _ in self.dec]

        def step(prev: torch.Tensor, t: int) -> torch.Tensor:
            x = self._embed(prev[:, None], t)
            for layer, kv, cache in zip(self.dec, cross, caches, strict=True):
                x = layer.step(x, kv, keep, cache, t, max_len)
            return self._logits(x[:, 0]).argmax(-1)

        return greedy_decode(
            step, src.shape[0], max_len, TorchOps(src.device), check_every, read_back=read_back
        )


class TorchOps:
    """dlbench.workloads.translation.transformer.DecodeOps on torch tensors of one device."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def full(self, n: int, value: int) -> torch.Tensor:
        return torch.full((n,), value, dtype=torch.long, device=self.device)

    def where(self, cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.where(cond, a, b)

    def equal(self, a: torch.Tensor, value: int) -> torch.Tensor:
        return a == value

    def logical_or(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a | b

    def all(self, a: torch.Tensor) -> bool:
        return bool(a.all())

    def stack(self, columns: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack(columns, 1)

    def to_numpy(self, ids: torch.Tensor) -> np.ndarray:
        return ids.int().cpu().numpy()


def build_transformer(**size: Any) -> Transformer:
    """The network of `dlbench.workloads.translation.transformer.TransformerSize.kwargs()`."""
    return Transformer(**size)


def build_model(cfg: TranslationConfig) -> Transformer:
    """The bench's entry (backends/skeleton.load_family): the network of model.size/vocab/dropout."""
    return build_transformer(**model_size(cfg).kwargs())


def infer(model: Transformer, inputs: tuple) -> torch.Tensor:
    """The inference step: greedy decoding of every sentence for as many steps as the target side is
    long (no early stop: every framework does the same work; workloads/translation/source.py counts it);
    the ids are left on the device (greedy_decode says why)."""
    src, tgt_in = inputs
    return model.translate(src, tgt_in.shape[1], check_every=0, read_back=False)


def run_facts(model: Transformer) -> dict[str, str]:
    return {"attention": ATTENTION}


def label_smoothed_ce(
    logits: torch.Tensor, labels: torch.Tensor, eps: float = LABEL_SMOOTHING
) -> torch.Tensor:
    """Mean over non-pad labels of (1 - eps) * NLL + eps * mean over the vocabulary of -log p: torch's
    fused cross_entropy computes exactly this formula (the Keras and Gluon losses write it out)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1).long(), ignore_index=PAD, label_smoothing=eps
    )


def load_neutral(model: Transformer, weights: dict[str, np.ndarray]) -> None:
    """Copy framework-neutral weights (dlbench.workloads.translation.transformer.weight_shapes names) into the model."""
    model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()}, strict=True)


def neutral_weights(model: Transformer) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


class TranslationTorch(TorchFamily):
    """The Transformer (greedy decoding for inference, label-smoothed cross-entropy), in PyTorch."""

    build_model = staticmethod(build_model)
    infer = staticmethod(infer)
    run_facts = staticmethod(run_facts)
    export_weights = staticmethod(neutral_weights)
    load_weights = staticmethod(load_neutral)

    def loss(self, spec: TaskSpec) -> Any:
        """Label-smoothed cross-entropy over the non-padding target tokens."""
        return functools.partial(label_smoothed_ce, eps=spec.loss_args["smoothing"])
