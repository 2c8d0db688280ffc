"""mode=converge on a parallel corpus: the training pairs epoch after epoch in the run seed's order, and
the held-out pairs for BLEU (docs/architecture.md, "Accuracy": the epoch/eval interface of data/epochs.EpochSource).

Framework-free, like workloads/classification/memory_source.py: the corpus is read and BPE-encoded once with numpy and
sentencepiece, every batch is made on the host and handed to the bench's own `to_device`, so the three
frameworks train on the same batches in the same order for the same seed.

- Training: the `train` split, pairs whose both sides fit `model.max_len` (EOS/BOS included) — a cut
  sentence would teach a wrong translation. Token-count batches of bounded shapes (workloads/translation/token_batches.py);
  epoch e takes the sentences within each length bucket in the order `seeds.stream(seed, "order", e)`
  draws, and the whole batches in a second permutation from the same stream.
- Evaluation: the `valid` split's pairs that fit, the first `dataset.eval_samples` of them, sorted by source
  length (less padding while decoding); each batch decodes greedily up to 2 x its longest source + 8
  tokens (the decoder input's width: `infer` decodes that many steps). `join_outputs` turns the predicted
  ids into detokenised text with the BPE model and `eval_labels` are the reference sentences, in the same
  order: the metric is sacrebleu's corpus BLEU (workloads/translation/eval.py), 0-100.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from dlbench.core.bench import Batch
from dlbench.data.epochs import EpochSource
from dlbench.data.seeds import stream
from dlbench.data.synthetic import HostBatch
from dlbench.errors import ConfigError
from dlbench.workloads.translation.bpe import BPE, train_bpe
from dlbench.workloads.translation.parallel_text import read_pairs
from dlbench.workloads.translation.source import corpus_path, host_batch, languages
from dlbench.workloads.translation.token_batches import bucket_groups, make_batch
from dlbench.workloads.translation.transformer import PAD

EVAL_SPLIT = "valid"


def decode_cap(src_width: int) -> int:
    """Greedy decoding steps for a batch whose longest source has src_width tokens (EOS included)."""
    return 2 * src_width + 8


class TranslationEpochs(EpochSource):
    def __init__(self, job: Any, spec: Any, to_device: Callable[[HostBatch], Batch]) -> None:
        ds, cfg = job.dataset, job.model
        src, tgt = languages(ds.name)
        path = corpus_path(job)
        self.bpe = BPE(train_bpe(path, src, tgt, cfg.vocab, path))
        self.max_len = cfg.max_len
        self.pairs = self._fitting(read_pairs(path, src, tgt, "train", ds.num_samples))
        held = self._fitting(read_pairs(path, src, tgt, EVAL_SPLIT), keep_text=True)[: ds.eval_samples]
        if not self.pairs or not held:
            raise ConfigError(
                f"dataset={ds.name}: no train or {EVAL_SPLIT} pair fits model.max_len={cfg.max_len} "
                "tokens; raise model.max_len"
            )
        held.sort(key=lambda p: len(p[0]))
        self.eval_src = [s for s, _, _ in held]
        self.references = [text for _, _, text in held]
        self.seed, self.to_device = job.schedule.seed, to_device
        self.batch_tokens, self.batch_size = cfg.batch_tokens, job.batch_size
        self.src_lens = [len(s) for s, _ in self.pairs]
        self.tgt_lens = [len(t) for _, t in self.pairs]
        self.steps_per_epoch = len(self._groups(np.arange(len(self.pairs))))
        if not self.steps_per_epoch:
            raise ConfigError(
                f"dataset={ds.name}: {len(self.pairs)} training pairs fill no whole batch of "
                f"model.batch_tokens={cfg.batch_tokens}; use a smaller batch"
            )
        self.start()

    def _fitting(self, pairs: Sequence[tuple[str, str]], keep_text: bool = False) -> list:
        """BPE-encoded pairs whose both sides fit max_len with their EOS/BOS (+ the target text)."""
        srcs = self.bpe.encode([p[0] for p in pairs])
        tgts = self.bpe.encode([p[1] for p in pairs])
        keep = self.max_len - 1
        return [
            (s, t, text) if keep_text else (s, t)
            for s, t, (_, text) in zip(srcs, tgts, pairs, strict=True)
            if 0 < len(s) <= keep and 0 < len(t) <= keep
        ]

    def _groups(self, order: np.ndarray) -> list[tuple[int, np.ndarray]]:
        return bucket_groups(self.src_lens, self.tgt_lens, self.batch_tokens, self.batch_size, order)

    def epoch_batches(self, epoch: int) -> Iterator[HostBatch]:
        """The training batches of `epoch`, in the order the seed draws."""
        rng = stream(self.seed, "order", epoch)
        groups = self._groups(rng.permutation(len(self.pairs)))
        for g in rng.permutation(len(groups)):
            width, members = groups[g]
            yield host_batch(make_batch([self.pairs[i] for i in members], width), train=True)

    def eval_batches(self, batch_size: int) -> Iterator[HostBatch]:
        """The held-out sources, each once, shortest first; the decoder input (all PAD) is as wide as the
        decoding may run, and there are no targets to compare on the device (units 0)."""
        for start in range(0, len(self.eval_src), batch_size):
            rows = self.eval_src[start : start + batch_size]
            batch = make_batch([(s, [PAD]) for s in rows])
            steps = decode_cap(batch.src.shape[1])
            blank = np.full((len(rows), steps), PAD, dtype=np.int32)
            yield HostBatch({"src": batch.src, "tgt_in": blank}, {"tgt_out": blank}, 0)

    def join_outputs(self, outputs: Sequence[np.ndarray]) -> list[str]:
        """Predicted ids of every eval batch -> detokenised hypotheses, in eval_labels' order."""
        return [text for ids in outputs for text in self.bpe.decode(np.asarray(ids).astype(np.int64))]

    @property
    def eval_labels(self) -> list[str]:
        return self.references

    def facts(self) -> dict[str, Any]:
        """What decided the data this run saw (MLflow tags run.*)."""
        return {
            "seed": self.seed,
            "data_order": f"numpy permutations per epoch from seed {self.seed} (data/seeds.py stream 'order')",
            "train_samples": len(self.pairs),
            "eval_samples": len(self.references),
            "eval_split": EVAL_SPLIT,
            "tokenizer": f"sentencepiece BPE, {self.bpe.vocab_size} pieces",
            "decoding": "greedy, up to 2 x longest source + 8 tokens",
        }
