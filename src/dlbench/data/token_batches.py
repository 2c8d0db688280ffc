"""Translation batches formed by token count, and the target-token count a step's throughput uses.

fairseq and DeepLearningExamples form batches by tokens, not sentences (`--max-tokens`, e.g. 5,120 per
GPU): sentences of similar length are grouped so that a batch of n sentences padded to its longest
source or target side holds at most `batch_tokens` tokens. The number of sentences per step therefore
varies, and throughput counts the real (unpadded) target tokens of each batch, EOS included:
fairseq's `ntokens`, reported as target tokens per second.

A sentence pair becomes three int32 arrays, right-padded with PAD (dlbench.core.transformer):
    src     = source ids + [EOS]
    tgt_in  = [BOS] + target ids        (decoder input, teacher forcing)
    labels  = target ids + [EOS]        (what the decoder must predict; PAD is ignored by the loss)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from dlbench.core.transformer import BOS, EOS, PAD

# Log-normal shape of target lengths, measured on the Bible pairs with an 8,000-piece BPE
# (data/bpe.py): mean of log(length) 3.35 (median 28.5 tokens), sd 0.43; source/target length log-ratio
# sd 0.15. The synthetic source uses it so a token-batched synthetic run has realistic padding.
LOG_LEN_MEAN, LOG_LEN_SD, LOG_RATIO_SD = 3.35, 0.43, 0.15
FIRST_ID = 4  # ids below are PAD, BOS, EOS, UNK


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


def _pad(rows: Sequence[Sequence[int]]) -> np.ndarray:
    out = np.full((len(rows), max(len(r) for r in rows)), PAD, dtype=np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def make_batch(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> Batch:
    """Pad encoded (source ids, target ids) pairs into a Batch (EOS/BOS added here)."""
    return Batch(
        src=_pad([[*s, EOS] for s, _ in pairs]),
        tgt_in=_pad([[BOS, *t] for _, t in pairs]),
        labels=_pad([[*t, EOS] for _, t in pairs]),
    )


def group_by_tokens(
    src_lens: Sequence[int], tgt_lens: Sequence[int], batch_tokens: int, max_sentences: int | None = None
) -> list[np.ndarray]:
    """Index groups, each of n sentences with n * max(longest source, longest target) <= batch_tokens
    (lengths here include the EOS/BOS the batch adds). Sentences are taken in order of length so padding
    stays small; a sentence longer than batch_tokens alone gets a batch of its own."""
    src_lens, tgt_lens = np.asarray(src_lens) + 1, np.asarray(tgt_lens) + 1
    order = np.lexsort((src_lens, tgt_lens))
    groups: list[np.ndarray] = []
    start, longest = 0, 0
    for pos, idx in enumerate(order):
        longest_with = max(longest, src_lens[idx], tgt_lens[idx])
        n = pos - start + 1
        full = n > 1 and (longest_with * n > batch_tokens or (max_sentences and n > max_sentences))
        if full:
            groups.append(order[start:pos])
            start, longest_with = pos, max(src_lens[idx], tgt_lens[idx])
        longest = longest_with
    if start < len(order):
        groups.append(order[start:])
    return groups


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
    """Endless token-count batches over encoded pairs: groups formed once, visited in a new random order
    every epoch (fairseq's behaviour). Pads each batch on the fly."""

    def __init__(
        self,
        pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
        batch_tokens: int,
        seed: int = 0,
        max_sentences: int | None = None,
    ) -> None:
        self.pairs = pairs
        self.groups = group_by_tokens(
            [len(s) for s, _ in pairs], [len(t) for _, t in pairs], batch_tokens, max_sentences
        )
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self) -> Iterator[Batch]:
        while True:
            for g in self.rng.permutation(len(self.groups)):
                yield make_batch([self.pairs[i] for i in self.groups[g]])
