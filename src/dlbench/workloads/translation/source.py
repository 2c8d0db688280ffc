"""Host batches for the translation task (TaskSpec.batches): synthetic pairs or a parallel corpus,
grouped by token count, padded with numpy; each batch's units counted here, on the host.

Units: a train step counts its target tokens without padding (fairseq's ntokens); an inference step
decodes every sentence for as many steps as the batch's target side is long (no early stop, so every
framework does the same work) and counts those generated tokens: sentences x decode length.

Real data (`dataset.format=parallel_text`): `dataset.path` (or `$dataset.path_env`) is a two-file corpus
(workloads/translation/parallel_text.py); the languages come from the dataset name `<corpus>_<src>_<tgt>` (bible_es_en:
Spanish -> English). A shared BPE of `model.vocab` pieces is trained there on first use (workloads/translation/bpe.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.core.names import project_relative
from dlbench.data.synthetic import HostBatch
from dlbench.errors import ConfigError
from dlbench.workloads.translation.bpe import BPE, train_bpe
from dlbench.workloads.translation.parallel_text import (
    APT_INSTALL,
    CorpusMissing,
    check_aligned,
    corpus_files,
    read_pairs,
)
from dlbench.workloads.translation.token_batches import Batch, TokenBatches, synthetic_pairs

SYNTHETIC_PAIRS = 4096  # distinct synthetic sentences a run cycles through
PREPARE = "python scripts/datasets/prepare_translation.py"


def languages(dataset_name: str) -> tuple[str, str]:
    """(source, target) language codes from a dataset name `<corpus>_<src>_<tgt>`."""
    parts = dataset_name.split("_")
    if len(parts) < 3:
        raise ConfigError(
            f"dataset={dataset_name}: a parallel_text dataset is named <corpus>_<src>_<tgt> "
            "(e.g. bible_es_en, wmt16_en_de) so that its files <split>.<src>/<split>.<tgt> can be found"
        )
    return parts[-2], parts[-1]


def corpus_path(job: Any) -> Path:
    """dataset.path, else $dataset.path_env (a relative one as core.names.project_relative takes it, like
    every dataset's); a missing corpus is one line with the command that makes it."""
    ds = job.dataset
    raw = ds.path or (os.environ.get(ds.path_env) if ds.path_env else None)
    if not raw:
        env = f" and ${ds.path_env} is not set" if ds.path_env else ""
        raise CorpusMissing(
            f"dataset={ds.name}: dataset.path is null{env}; make the Bible corpus with `{PREPARE} --out DIR` "
            f"(it needs `{APT_INSTALL}`) and set dataset.path=DIR, or point it at a two-file corpus"
        )
    return project_relative(raw)


def split_for(job: Any) -> str:
    return "train" if job.mode in ("train", "converge") else "valid"


def check_corpus(job: Any) -> dict[str, Any]:
    """The orchestrator's check before a worker starts: path, the two files (aligned line by line: a
    cheap count before the worker trains BPE on them), the languages."""
    src, tgt = languages(job.dataset.name)
    path = corpus_path(job)
    if not path.exists():
        raise CorpusMissing(
            f"dataset={job.dataset.name}: {path} does not exist; make it with `{PREPARE} --out {path}` "
            f"(it needs `{APT_INSTALL}`) or point dataset.path at a two-file corpus"
        )
    check_aligned(path, src, tgt, split_for(job))
    if job.mode == "converge":  # BLEU on the held-out pairs (workloads/translation/epochs.py)
        corpus_files(path, src, tgt, "valid")
    job.dataset.path = str(path)
    return {"dataset.path": str(path), "dataset.languages": f"{src}-{tgt}"}


def _corpus_pairs(job: Any) -> list[tuple[list[int], list[int]]]:
    src, tgt = languages(job.dataset.name)
    path = corpus_path(job)
    bpe = BPE(train_bpe(path, src, tgt, job.model.vocab, path))
    pairs = read_pairs(path, src, tgt, split_for(job), job.dataset.num_samples)
    keep = job.model.max_len - 1  # room for EOS / BOS
    encoded = zip(bpe.encode([p[0] for p in pairs]), bpe.encode([p[1] for p in pairs]), strict=True)
    return [(s[:keep], t[:keep]) for s, t in encoded if s and t]


def _pairs(job: Any, rng: np.random.Generator) -> list:
    cfg = job.model
    if job.dataset.name == "synthetic":
        length = cfg.max_len - 1 if cfg.lengths == "fixed" else None
        return synthetic_pairs(SYNTHETIC_PAIRS, cfg.vocab, rng, length=length, max_len=cfg.max_len - 1)
    return _corpus_pairs(job)


def host_batch(batch: Batch, train: bool) -> HostBatch:
    units = batch.target_tokens if train else batch.sentences * batch.tgt_in.shape[1]
    return HostBatch({"src": batch.src, "tgt_in": batch.tgt_in}, {"tgt_out": batch.labels}, units)


class TranslationBatches:
    """TaskSpec.batches of the translation task: endless host batches for one job, of `shapes` distinct
    shapes, one batch of each first (the skeleton warms up at least that many steps). Synthetic data
    announces a `pool` of one epoch's batches: the source puts them on the device once, before timing
    (real data is padded and copied step by step, as a user's loader would)."""

    def __init__(self, job: Any, spec: Any = None) -> None:
        rng = np.random.default_rng(0)
        pairs = _pairs(job, rng)
        cfg = job.model
        try:
            self.batches = TokenBatches(pairs, cfg.batch_tokens, int(rng.integers(1 << 31)), job.batch_size)
        except ValueError as exc:
            raise ConfigError(
                f"dataset={job.dataset.name}: {exc}; use more pairs or a smaller batch"
            ) from None
        self.shapes = self.batches.shapes
        self.pool = len(self.batches) if job.dataset.name == "synthetic" else 0
        self.train = job.mode != "infer"
        self._it = iter(self.batches)

    def __iter__(self) -> Iterator[HostBatch]:
        return self

    def __next__(self) -> HostBatch:
        return host_batch(next(self._it), self.train)
