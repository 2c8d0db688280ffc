"""The Transformer-base yardstick: the translation training loop and greedy decoder a careful engineer writes
by hand, no harness around them.

Transformer-base (Vaswani et al. 2017): post-norm, d_model 512, 8 heads, FFN 2048, 6 + 6 layers, dropout 0.1,
sinusoidal positions, a shared 32,000-token vocabulary with tied input/output embeddings, no final encoder or
decoder norm: 60,522,496 parameters. Attention is torch's scaled_dot_product_attention (causal flag in the
decoder; a key-padding mask on every batch by default, as the harness passes one, since real batches are
padded: without a mask torch picks its flash kernel, with one its memory-efficient kernel; on an H200 at
40,960 tokens a step the unmasked loop decoded 12% faster (AMP, 240,293 vs 214,104 tokens/s, session s6).
`--mask auto` masks only batches with padding, the old behaviour, so one command can time both). Loss:
label-smoothed (0.1) cross-entropy ignoring padding; Adam (0.9, 0.98, eps 1e-9) with the paper's warm-up
schedule.

Synthetic data made once on the device: a pool of batches of `--batch-tokens // --max-len` sentence pairs,
source and target lengths uniform in [--min-len, --max-len] (equal for a fixed-length run), padded to
--max-len so every step has the same shape. Training counts **target tokens** (non-padding labels, the
DeepLearningExamples/fairseq unit) per second. `--mode infer` is greedy decoding with cached keys and values:
the encoder once, then --decode-len steps of one token per sentence (EOS does not stop it, so the work is
fixed); it counts generated tokens per second. Imports nothing from dlbench (see bare_common.py).

Usage: python yardsticks/bare_transformer.py [--batch-tokens 5120] [--min-len 8] [--max-len 64]
       [--precision amp|bf16|fp32|tf32] [--mode train|infer] [--decode-len N] [--warmup 20] [--steps 20]
       [--windows 8] [--optimizer fused|foreach] [--device auto|cuda|cpu] [--compile [--compile-mode M]]
       [--mask always|auto]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys

import bare_common as bc
import bare_data as bd
import torch
from torch import nn
from torch.nn import functional as F

PAD, BOS, EOS, FIRST_WORD = 0, 1, 2, 4


class SelfAttention(nn.Module):
    """Multi-head self-attention with one fused q/k/v projection; `step` is one decoding position with a
    key/value cache."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.h = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = False
    ) -> torch.Tensor:
        q, k, v = (split_heads(t, self.h) for t in self.qkv(x).chunk(3, -1))
        return self.out(
            merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal))
        )

    def step(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor], t: int) -> torch.Tensor:
        q, k, v = (split_heads(z, self.h) for z in self.qkv(x).chunk(3, -1))
        cache[0][:, :, t : t + 1] = k
        cache[1][:, :, t : t + 1] = v
        o = F.scaled_dot_product_attention(q, cache[0][:, :, : t + 1], cache[1][:, :, : t + 1])
        return self.out(merge_heads(o))


class CrossAttention(nn.Module):
    """Decoder-to-encoder attention; keys and values of the encoder output are computed once per sentence."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.h = heads
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, d)

    def keys_values(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = self.kv(memory).chunk(2, -1)
        return split_heads(k, self.h), split_heads(v, self.h)

    def forward(self, x: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor | None):
        o = F.scaled_dot_product_attention(split_heads(self.q(x), self.h), *kv, attn_mask=mask)
        return self.out(merge_heads(o))


def split_heads(x: torch.Tensor, h: int) -> torch.Tensor:
    b, t, d = x.shape
    return x.view(b, t, h, d // h).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


def ffn(d: int, d_ff: int) -> nn.Sequential:
    # Not ReLU(inplace=True): in place on the view that Linear returns for 3-D input, autograd copies the
    # (tokens x d_ff) activation about five more times per layer (CPU profile), which matches this loop
    # trailing the harness by 4.8% (AMP, 40,960 tokens) and 1.9% (fp32) on an H200 (results/h200/transformer_batch_copy.md).
    return nn.Sequential(nn.Linear(d, d_ff), nn.ReLU(), nn.Linear(d_ff, d))


class EncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.attn, self.ffn = SelfAttention(d, heads), ffn(d, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.norm1(x + self.drop(self.attn(x, mask)))
        return self.norm2(x + self.drop(self.ffn(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.attn, self.cross, self.ffn = SelfAttention(d, heads), CrossAttention(d, heads), ffn(d, d_ff)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory_kv, mask, cache=None, t: int = 0) -> torch.Tensor:
        a = self.attn(x, causal=True) if cache is None else self.attn.step(x, cache, t)
        x = self.norm1(x + self.drop(a))
        x = self.norm2(x + self.drop(self.cross(x, memory_kv, mask)))
        return self.norm3(x + self.drop(self.ffn(x)))


class Transformer(nn.Module):
    """Encoder-decoder with one embedding shared by source, target and the output projection."""

    def __init__(self, vocab=32000, d=512, heads=8, d_ff=2048, layers=6, dropout=0.1, max_len=1024) -> None:
        super().__init__()
        self.d, self.heads = d, heads
        self.embed = nn.Embedding(vocab, d, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, 0, d**-0.5)
        with torch.no_grad():
            self.embed.weight[PAD].zero_()
        self.register_buffer("pe", sinusoid(max_len, d), persistent=False)
        self.enc = nn.ModuleList(EncoderLayer(d, heads, d_ff, dropout) for _ in range(layers))
        self.dec = nn.ModuleList(DecoderLayer(d, heads, d_ff, dropout) for _ in range(layers))
        self.drop = nn.Dropout(dropout)

    def embed_at(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        pos = self.pe[start : start + tokens.shape[1]]
        return self.drop(self.embed(tokens) * math.sqrt(self.d) + pos)

    def encode(self, src: torch.Tensor, padded: bool) -> tuple[list, torch.Tensor | None]:
        """Encoder output as each decoder layer's cross-attention keys/values, and the key-padding mask."""
        mask = (src != PAD)[:, None, None, :] if padded else None
        x = self.embed_at(src)
        for layer in self.enc:
            x = layer(x, mask)
        return [layer.cross.keys_values(x) for layer in self.dec], mask

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, padded: bool) -> torch.Tensor:
        memory_kv, mask = self.encode(src, padded)
        y = self.embed_at(tgt_in)
        for layer, kv in zip(self.dec, memory_kv, strict=True):
            y = layer(y, kv, mask)
        return y @ self.embed.weight.t()

    def decode_step(self, tokens, t: int, memory_kv, mask, caches) -> torch.Tensor:
        """Logits for position t from the token at t, reusing the cached keys/values of positions < t."""
        y = self.embed_at(tokens[:, None], t)
        for layer, kv, cache in zip(self.dec, memory_kv, caches, strict=True):
            y = layer(y, kv, mask, cache, t)
        return y[:, 0] @ self.embed.weight.t()


def sinusoid(n: int, d: int) -> torch.Tensor:
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return pe


def greedy(model: Transformer, src: torch.Tensor, steps: int, padded: bool, encode, step) -> torch.Tensor:
    """Greedy decoding with a preallocated key/value cache per decoder layer; returns (B, steps) token ids.
    A sentence that has emitted EOS gets PAD from then on (the output a translation needs, and what the
    harness does: three small ops a step), but decoding never stops early, so the work is fixed."""
    memory_kv, mask = encode(src, padded)
    b, dh = src.shape[0], model.d // model.heads
    k0 = memory_kv[0][0]
    caches = [
        (k0.new_empty(b, model.heads, steps, dh), k0.new_empty(b, model.heads, steps, dh)) for _ in model.dec
    ]
    tokens = torch.full((b,), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    out = []
    for t in range(steps):
        tokens = step(tokens, t, memory_kv, mask, caches).argmax(-1).masked_fill(done, PAD)
        done |= tokens == EOS
        out.append(tokens)
    return torch.stack(out, 1)


def sentence_pairs(
    n: int, a: argparse.Namespace, vocab: int, dev: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n random pairs, lengths uniform in [min_len, max_len], padded to max_len: (src, tgt_in, labels).
    The decoder reads BOS + target[:-1] and is trained to emit the target, which ends with EOS."""

    def tokens(lengths: torch.Tensor) -> torch.Tensor:
        ids = torch.randint(FIRST_WORD, vocab, (n, a.max_len), device=dev)
        pos = torch.arange(a.max_len, device=dev)
        ids = ids.masked_fill(pos == (lengths - 1)[:, None], EOS)
        return ids.masked_fill(pos >= lengths[:, None], PAD)

    src = tokens(torch.randint(a.min_len, a.max_len + 1, (n,), device=dev))
    labels = tokens(torch.randint(a.min_len, a.max_len + 1, (n,), device=dev))
    tgt_in = torch.cat([torch.full((n, 1), BOS, device=dev), labels[:, :-1]], 1).masked_fill(
        labels == PAD, PAD
    )
    return src, tgt_in, labels


def noam(step: int, d: int = 512, warmup: int = 4000) -> float:
    """The paper's learning rate: linear warm-up, then inverse square root of the step."""
    step = max(step, 1)
    return d**-0.5 * min(step**-0.5, step * warmup**-1.5)


def main() -> int:
    p = bc.parser(__doc__, warmup=20, steps=20, windows=8)
    bd.transformer_flags(p)  # the TF and JAX yardsticks' flags
    p.add_argument(
        "--mask", choices=("always", "auto"), default="always",
        help="key-padding mask on every batch (as the harness) or only on batches with padding",
    )  # fmt: skip
    return bc.run_all(p, one_config)


def one_config(a: argparse.Namespace) -> int:
    """One configuration: build, warm up, time, print its BARE line."""
    prec = bc.setup(a)
    dev = prec.device
    a.batch_tokens = a.batch_tokens or (5120 if dev.type == "cuda" else 256)
    a.decode_len = a.decode_len or a.max_len
    sentences = max(1, a.batch_tokens // a.max_len)
    padded = a.mask == "always" or a.min_len < a.max_len
    model = Transformer(
        a.vocab, a.d_model, a.heads, a.d_ff, a.layers, a.dropout, max_len=max(a.max_len, a.decode_len)
    )
    model = model.to(dev)
    params = bc.param_count(model)
    pool = [sentence_pairs(sentences, a, a.vocab, dev) for _ in range(a.pool)]
    counts = [int((labels != PAD).sum()) for _, _, labels in pool]
    model.train(a.mode == "train")
    it = itertools.count()

    if a.mode == "infer":
        encode, dstep = bc.maybe_compile(model.encode, a), bc.maybe_compile(model.decode_step, a)

        def step() -> tuple[int, None]:
            src = pool[next(it) % a.pool][0]
            with torch.inference_mode(), prec.autocast():
                greedy(model, src, a.decode_len, padded, encode, dstep)
            return sentences * a.decode_len, None
    else:
        run = bc.maybe_compile(model, a)
        opt = torch.optim.Adam(
            model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, **bc.optimizer_kwargs(a, dev)
        )
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: noam(s + 1, a.d_model, a.lr_warmup))

        def step() -> tuple[int, torch.Tensor]:
            i = next(it) % a.pool
            src, tgt_in, labels = pool[i]
            with prec.autocast():
                logits = run(src, tgt_in, padded)
                loss = F.cross_entropy(
                    logits.view(-1, a.vocab), labels.view(-1), ignore_index=PAD, label_smoothing=0.1
                )
            bc.update(loss, opt, prec)
            sched.step()
            return counts[i], loss.detach()

    rates, loss = bc.measure(step, a, dev)
    unit = "generated tokens/s" if a.mode == "infer" else "target tokens/s"
    return bc.report(a, prec, rates, loss, model="transformer", params=params, unit=unit, sentences=sentences,
                     target_tokens_per_batch=sum(counts) / len(counts))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
