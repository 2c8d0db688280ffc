"""Translation batches formed by token count, and the target-token count a step's throughput uses.

fairseq and DeepLearningExamples form batches by tokens, not sentences (`--max-tokens`, e.g. 5,120 per
GPU): sentences of similar length are grouped so that a batch of n sentences padded to its longest
side holds at most `batch_tokens` tokens. The number of sentences per step therefore varies, and
throughput counts the real (unpadded) target tokens of each batch, EOS included: fairseq's `ntokens`,
reported as target tokens per second.

Shapes are bounded: lengths are padded to multiples of BUCKET (8) and a bucket holds only whole batches of
batch_tokens // L sentences, so a run sees at most max_len / 8 shapes, every one of them in warm-up
(`TokenBatches` starts with one batch of each): a new shape inside a timed window would retrace (TF),
re-bind (MXNet static_shape) or re-autotune (cuDNN) there and slow that window.

A sentence pair becomes three int32 arrays, right-padded with PAD (dlbench.workloads.translation.transformer):
    src     = source ids + [EOS]
    tgt_in  = [BOS] + target ids        (decoder input, teacher forcing)
    labels  = target ids + [EOS]        (what the decoder must predict; PAD is ignored by the loss)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from dlbench.workloads.translation.transformer import BOS, EOS, PAD

# Log-normal shape of target lengths, measured on the Bible pairs with an 8,000-piece BPE
# (workloads/translation/bpe.py): mean of log(length) 3.35 (median 28.5 tokens), sd 0.43; source/target length log-ratio
# sd 0.15. The synthetic source uses it so a token-batched synthetic run has realistic padding.
LOG_LEN_MEAN, LOG_LEN_SD, LOG_RATIO_SD = 3.35, 0.43, 0.15
FIRST_ID = 4  # ids below are PAD, BOS, EOS, UNK
# Padded lengths are multiples of 8 (fairseq's --required-seq-len-multiple; tensor-core friendly), so a
# run sees at most max_len / 8 batch shapes: each one compiles / retraces / autotunes once, in warm-up.
BUCKET = 8


@dataclass
class Batch:
    src: np.ndarray  # (B, S) int32
    tgt_in: np.ndarray  # (B, T) int32
    labels: np.ndarray  # (B, T) int32

    @property
    def sentences(self) -> int:
        return int(self.src.shape[0])

    @property
    def target_tokens(self) -> int:
        return target_tokens(self.labels)


def target_tokens(labels: np.ndarray) -> int:
    """Target tokens of a batch, padding excluded (fairseq's ntokens): the throughput unit."""
    return int(np.count_nonzero(np.asarray(labels) != PAD))


def bucket(length: int) -> int:
    """A padded length: `length` rounded up to a multiple of BUCKET."""
    return -(-int(length) // BUCKET) * BUCKET


def _pad(rows: Sequence[Sequence[int]], width: int | None = None) -> np.ndarray:
    out = np.full((len(rows), width or max(len(r) for r in rows)), PAD, dtype=np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def make_batch(pairs: Sequence[tuple[Sequence[int], Sequence[int]]], width: int | None = None) -> Batch:
    """Pad encoded (source ids, target ids) pairs into a Batch (EOS/BOS added here), to `width` columns
    on both sides when given (a bucket's length), else each side to its longest row."""
    return Batch(
        src=_pad([[*s, EOS] for s, _ in pairs], width),
        tgt_in=_pad([[BOS, *t] for _, t in pairs], width),
        labels=_pad([[*t, EOS] for _, t in pairs], width),
    )


def bucket_groups(
    src_lens: Sequence[int],
    tgt_lens: Sequence[int],
    batch_tokens: int,
    batch_size: int = 1,
    order: Sequence[int] | None = None,
) -> list[tuple[int, np.ndarray]]:
    """Whole batches of one shape per length bucket, as (padded length L, sentence indices).

    A pair goes to the bucket of its longer side (EOS/BOS counted) rounded up to a multiple of BUCKET;
    a bucket is cut into batches of batch_tokens // L sentences (`batch_size` when batch_tokens is 0),
    each padded to L on both sides, so n * L <= batch_tokens and a bucket has one (n, L) shape. The
    sentences left over in a bucket (fewer than a batch) are dropped: no odd-sized tail batch, and at
    most max_len / BUCKET shapes. `order` is the order sentences are taken in within a bucket (a seeded
    permutation per epoch changes which ones are left over); default: by index."""
    lens = np.maximum(np.asarray(src_lens), np.asarray(tgt_lens)) + 1
    order = np.arange(len(lens)) if order is None else np.asarray(order)
    keys = np.array([bucket(n) for n in lens[order]], dtype=int)
    groups = []
    for width in np.unique(keys):
        members = order[keys == width]
        n = max(1, batch_tokens // width) if batch_tokens else batch_size
        groups += [(int(width), members[i : i + n]) for i in range(0, len(members) - n + 1, n)]
    return groups


def shapes_first(widths: Sequence[int], order: np.ndarray) -> np.ndarray:
    """`order` (batch indices) with the first batch of every distinct width moved to the front, in order
    of appearance: a warm-up of that many steps then meets every shape the timed windows will see."""
    seen: set[int] = set()
    first = []
    for i in order:
        if widths[i] not in seen:
            seen.add(widths[i])
            first.append(i)
    chosen = set(first)
    return np.array(first + [i for i in order if i not in chosen], dtype=int)


def synthetic_pairs(
    n: int, vocab: int, rng: np.random.Generator, length: int | None = None, max_len: int = 256
) -> list[tuple[np.ndarray, np.ndarray]]:
    """n random (source, target) id pairs with ids in [4, vocab). Lengths are fixed (`length`) for a
    controlled run, or drawn from the log-normal measured on real pairs (LOG_LEN_MEAN...), in [1, max_len]."""
    if length is not None:
        tgt = np.full(n, length)
        src = tgt
    else:
        tgt = np.exp(rng.normal(LOG_LEN_MEAN, LOG_LEN_SD, n))
        src = tgt * np.exp(rng.normal(0.0, LOG_RATIO_SD, n))
        tgt, src = (np.clip(np.rint(x), 1, max_len).astype(int) for x in (tgt, src))
    return [
        (rng.integers(FIRST_ID, vocab, s, dtype=np.int32), rng.integers(FIRST_ID, vocab, t, dtype=np.int32))
        for s, t in zip(src, tgt, strict=True)
    ]


class TokenBatches:
    """Endless whole batches of bounded shapes over encoded pairs (`bucket_groups`): formed once,
    visited in a new random order every epoch (fairseq's behaviour); the first epoch starts with one
    batch of each shape (`shapes_first`), so a warm-up of `shapes` steps compiles/autotunes them all.
    Pads each batch on the fly."""

    def __init__(
        self,
        pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
        batch_tokens: int,
        seed: int = 0,
        batch_size: int = 1,
    ) -> None:
        self.pairs = pairs
        self.groups = bucket_groups(
            [len(s) for s, _ in pairs], [len(t) for _, t in pairs], batch_tokens, batch_size
        )
        if not self.groups:
            raise ValueError(f"{len(pairs)} sentence pairs fill no whole batch of {batch_tokens} tokens")
        self.rng = np.random.default_rng(seed)

    @property
    def shapes(self) -> int:
        """Distinct batch shapes (one per length bucket)."""
        return len({width for width, _ in self.groups})

    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self) -> Iterator[Batch]:
        widths = [width for width, _ in self.groups]
        order = shapes_first(widths, self.rng.permutation(len(self.groups)))
        while True:
            for g in order:
                width, members = self.groups[g]
                yield make_batch([self.pairs[i] for i in members], width)
            order = self.rng.permutation(len(self.groups))
