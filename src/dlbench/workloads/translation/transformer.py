"""Transformer (Vaswani et al. 2017) facts every framework's translation model shares, framework-free.

The backends hand-write the same network (workloads/translation/<fw>.py); what must be
identical between them lives here once: the sizes, the special token ids, the framework-neutral weight
names (so a test can load one set of numpy weights into every framework and compare outputs), the parameter
and FLOP counts, the peak learning rate and the greedy decoding loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

PAD, BOS, EOS, UNK = (
    0,
    1,
    2,
    3,
)  # sentencepiece is trained with these ids (workloads/translation/parallel_text.py)
LABEL_SMOOTHING = 0.1


@dataclass(frozen=True)
class TransformerSize:
    """Hyper-parameters of one size; `vocab` is the shared source/target vocabulary."""

    d_model: int
    heads: int
    ffn: int
    encoder_layers: int
    decoder_layers: int
    vocab: int = 32000
    dropout: float = 0.1

    def kwargs(self) -> dict:
        """The keyword arguments every backend's `build_transformer` takes."""
        return dict(vars(self))


SIZES: dict[str, TransformerSize] = {
    "tiny": TransformerSize(128, 4, 512, 2, 2, vocab=1000),
    "base": TransformerSize(512, 8, 2048, 6, 6),
    "big": TransformerSize(1024, 16, 4096, 6, 6),
}


def size(name: str, **overrides: int | float) -> TransformerSize:
    """SIZES[name] with fields replaced (e.g. vocab= the tokenizer's); one line naming the choices."""
    if name not in SIZES:
        raise ValueError(f"model.size={name}: choose one of {', '.join(SIZES)}")
    return TransformerSize(**{**vars(SIZES[name]), **overrides})


def sinusoid_positions(length: int, d_model: int) -> np.ndarray:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...) (the paper's interleaving), float32."""
    pos = np.arange(length, dtype=np.float64)[:, None]
    inv = np.power(10000.0, -np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.sin(pos * inv)
    pe[:, 1::2] = np.cos(pos * inv)
    return pe.astype(np.float32)


# --- framework-neutral weight names ---------------------------------------------------------------
# Dense weights are stored (out, in) like torch.nn.Linear; Keras transposes. Self-attention projects
# q, k and v with one fused matrix whose rows are [q; k; v]; cross-attention has q from the decoder and
# a fused [k; v] from the encoder output. MXNet's interleaved attention ops need the heads interleaved
# and permute these rows when loading (workloads/translation/mxnet.py).


def _dense(prefix: str, out: int, inp: int) -> Iterator[tuple[str, tuple[int, ...]]]:
    yield f"{prefix}.weight", (out, inp)
    yield f"{prefix}.bias", (out,)


def _norm(prefix: str, d: int) -> Iterator[tuple[str, tuple[int, ...]]]:
    yield f"{prefix}.weight", (d,)
    yield f"{prefix}.bias", (d,)


def weight_shapes(s: TransformerSize) -> dict[str, tuple[int, ...]]:
    """Every trainable tensor by neutral name, in a fixed order; the output projection is `embed.weight`."""
    d, f = s.d_model, s.ffn
    shapes: dict[str, tuple[int, ...]] = {"embed.weight": (s.vocab, d)}

    def ffn(p: str) -> Iterator[tuple[str, tuple[int, ...]]]:
        yield from _dense(f"{p}.ff1", f, d)
        yield from _dense(f"{p}.ff2", d, f)

    for i in range(s.encoder_layers):
        p = f"enc.{i}"
        shapes.update(_dense(f"{p}.self_attn.qkv", 3 * d, d))
        shapes.update(_dense(f"{p}.self_attn.out", d, d))
        shapes.update(_norm(f"{p}.norm1", d))
        shapes.update(ffn(p))
        shapes.update(_norm(f"{p}.norm2", d))
    for i in range(s.decoder_layers):
        p = f"dec.{i}"
        shapes.update(_dense(f"{p}.self_attn.qkv", 3 * d, d))
        shapes.update(_dense(f"{p}.self_attn.out", d, d))
        shapes.update(_norm(f"{p}.norm1", d))
        shapes.update(_dense(f"{p}.cross_attn.q", d, d))
        shapes.update(_dense(f"{p}.cross_attn.kv", 2 * d, d))
        shapes.update(_dense(f"{p}.cross_attn.out", d, d))
        shapes.update(_norm(f"{p}.norm2", d))
        shapes.update(ffn(p))
        shapes.update(_norm(f"{p}.norm3", d))
    return shapes


def param_count(s: TransformerSize) -> int:
    """Trainable parameters: 60,522,496 at base size with a 32,000 vocabulary."""
    return sum(math.prod(shape) for shape in weight_shapes(s).values())


def random_weights(s: TransformerSize, seed: int = 0, scale: float = 0.1) -> dict[str, np.ndarray]:
    """Weights for cross-framework tests: N(0, scale) matrices, norms near (1, 0), all float32."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in weight_shapes(s).items():
        w = rng.normal(0.0, scale, shape)
        if ".norm" in name and name.endswith(".weight"):
            w += 1.0
        out[name] = w.astype(np.float32)
    return out


# --- cost and schedule ------------------------------------------------------------------------------


def forward_flops(s: TransformerSize, batch: int, src_len: int, tgt_len: int) -> int:
    """Multiply-add FLOPs (2 per MAC) of one teacher-forced forward pass: every matmul, including the
    attention scores and weighted sums and the tied output projection; elementwise work is ignored."""
    d, f, n, m = s.d_model, s.ffn, src_len, tgt_len
    enc = 2 * n * (4 * d * d + 2 * d * f) + 2 * 2 * n * n * d
    dec = 2 * m * (4 * d * d + 2 * d * f) + 2 * 2 * m * m * d
    cross = 2 * (m * 2 * d * d + n * 2 * d * d) + 2 * 2 * m * n * d
    out = 2 * m * d * s.vocab
    return batch * (s.encoder_layers * enc + s.decoder_layers * (dec + cross) + out)


def peak_lr(d_model: int, warmup: int = 4000) -> float:
    """The learning rate at the end of Vaswani et al.'s warm-up (eq. 3 at step = warmup): d^-0.5 * warmup^-0.5,
    7.0e-4 for base. OptimizerSpec(decay="inverse_sqrt").lr_factor gives the rest of the schedule."""
    return d_model**-0.5 * warmup**-0.5


# --- greedy decoding ------------------------------------------------------------------------------


class DecodeOps(Protocol):
    """The few array operations the decoding loop needs, on the framework's own (device) arrays, so
    tokens stay on the device and the host reads back one flag per check."""

    def full(self, n: int, value: int) -> Any: ...
    def where(self, cond: Any, a: Any, b: Any) -> Any: ...
    def equal(self, a: Any, value: int) -> Any: ...
    def logical_or(self, a: Any, b: Any) -> Any: ...
    def all(self, a: Any) -> bool: ...
    def stack(self, columns: list[Any]) -> Any: ...
    def to_numpy(self, ids: Any) -> np.ndarray: ...


class NumpyOps:
    """DecodeOps for numpy arrays (the framework-free tests)."""

    def full(self, n: int, value: int) -> np.ndarray:
        return np.full(n, value, dtype=np.int32)

    def where(self, cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(cond, a, b).astype(np.int32)

    def equal(self, a: np.ndarray, value: int) -> np.ndarray:
        return np.asarray(a) == value

    def logical_or(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a | b

    def all(self, a: np.ndarray) -> bool:
        return bool(a.all())

    def stack(self, columns: list[np.ndarray]) -> np.ndarray:
        return np.stack(columns, 1)

    def to_numpy(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(ids, dtype=np.int32)


def greedy_decode(
    step: Callable[[Any, int], Any],
    batch: int,
    max_len: int,
    ops: DecodeOps | None = None,
    check_every: int = 1,
    fused: bool = False,
    read_back: bool = True,
) -> Any:
    """The decoding loop every framework shares. `step(prev_ids, t)` feeds each sentence's previous
    token (BOS first) at position t to the decoder, which extends its own key/value cache, and returns
    the argmax ids. Sentences that produced EOS get PAD afterwards. The loop stops after max_len tokens,
    or when every sentence has produced EOS, which it checks on the host every `check_every` steps (1 =
    fairseq's per-step check; more = fewer device syncs, and the extra steps only add PAD columns,
    which are cut off; 0 = never: exactly max_len steps, the fixed work a throughput benchmark times).
    `fused`: `step(prev_ids, done, t)` itself puts PAD after EOS and returns (ids, done), inside one
    compiled call, so each position costs one dispatch from the host instead of four.
    Returns (batch, steps) int32 ids as numpy, PAD columns cut; `read_back=False` returns them uncut,
    stacked on the device, unread: the inference step's output, as a classifier's step leaves its logits.
    Reading them back waits for the decode to finish, so the host could not queue the next batch's
    positions meanwhile (the hand-written loops, yardsticks/bare_*transformer.py, never read back)."""
    ops = ops or NumpyOps()
    pad = ops.full(batch, PAD)
    prev = ops.full(batch, BOS)
    done = ops.equal(prev, EOS)
    columns = []
    for t in range(max_len):
        if fused:
            nxt, done = step(prev, done, t)
        else:
            nxt = ops.where(done, pad, step(prev, t))
            done = ops.logical_or(done, ops.equal(nxt, EOS))
        columns.append(nxt)
        prev = nxt
        if check_every and (t + 1) % check_every == 0 and ops.all(done):
            break
    ids = ops.stack(columns)
    return trim_padding(ops.to_numpy(ids)) if read_back else ids


def trim_padding(ids: np.ndarray) -> np.ndarray:
    """(batch, steps) ids without the trailing columns that are PAD in every sentence (at least one column
    stays): what decoding past the point where every sentence had ended adds. A loop that stops early and
    one that decodes every position give the same array."""
    used = np.flatnonzero((ids != PAD).any(0))
    return ids[:, : used[-1] + 1] if used.size else ids[:, :1]


def generated_tokens(ids: np.ndarray) -> int:
    """Tokens a greedy decode produced, EOS included, padding after it excluded."""
    return int(np.count_nonzero(ids != PAD))
