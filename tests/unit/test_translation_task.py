"""The translation task without a framework: its spec, its config checks, and the host batches it makes
for synthetic data and a two-file corpus (units counted per batch: target tokens / generated tokens)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dlbench.config import JobConfig
from dlbench.errors import ConfigError
from dlbench.workloads.registry import task_spec
from dlbench.workloads.translation.parallel_text import CorpusMissing, write_pairs
from dlbench.workloads.translation.source import TranslationBatches, check_corpus, languages
from dlbench.workloads.translation.spec import TranslationConfig
from dlbench.workloads.translation.transformer import BOS, EOS, PAD


def _job(mode: str = "train", dataset: dict | None = None, **model) -> JobConfig:
    cfg = {"size": "tiny", "vocab": 100, "max_len": 16, **model}
    job = JobConfig.from_dict({"model": {**TranslationConfig(**cfg).__dict__}, "dataset": dataset or {}})
    job.mode = mode
    return job


def test_spec_counts_target_tokens_in_training_and_generated_tokens_in_inference():
    spec = task_spec(TranslationConfig(size="base"))
    assert (spec.unit, spec.infer_unit, spec.loss, spec.metric) == (
        "target tokens", "generated tokens", "label_smoothed_cross_entropy", "bleu"
    )  # fmt: skip
    assert list(spec.inputs) == ["src", "tgt_in"] and list(spec.targets) == ["tgt_out"]
    assert spec.loss_args == {"smoothing": 0.1, "ignore_index": PAD}
    assert spec.count_units({"tgt_out": np.array([[5, 6, EOS, PAD], [7, EOS, PAD, PAD]])}) == 5


def test_token_batches_vary_and_count_real_target_tokens():
    batches = list(itertools.islice(TranslationBatches(_job(batch_tokens=512, max_len=64), None), 12))
    assert len({b.inputs["src"].shape for b in batches}) > 1  # shapes vary step to step
    for b in batches:
        labels = b.targets["tgt_out"]
        assert b.units == np.count_nonzero(labels) < labels.size or b.units == labels.size
        assert b.inputs["tgt_in"].shape == labels.shape and (b.inputs["tgt_in"][:, 0] == BOS).all()
        assert max(b.inputs["src"].shape[1], labels.shape[1]) * len(labels) <= 512
        assert labels.max() < 100 and b.inputs["src"].shape[1] <= 64


def test_fixed_lengths_by_sentences_and_infer_units():
    train = next(TranslationBatches(_job(batch_tokens=0, batch_size=3, lengths="fixed"), None))
    assert train.inputs["src"].shape == (3, 16) and train.units == 3 * 16
    infer = next(TranslationBatches(_job("infer", batch_tokens=0, batch_size=3, lengths="fixed"), None))
    assert infer.units == 3 * infer.inputs["tgt_in"].shape[1]  # every sentence decodes the target length


def test_config_checks_are_one_line_each():
    bad = TranslationConfig(size="huge", lengths="uniform", batch_tokens=8, max_len=64)
    messages = [m for ok, m in bad.check() if not ok]
    assert any("model.size=huge" in m for m in messages)
    assert any("model.lengths=uniform" in m for m in messages)
    assert any("model.batch_tokens=8" in m for m in messages)
    assert all("\n" not in m for m in messages)


def test_parallel_text_corpus_is_read_through_bpe(tmp_path):
    rng = np.random.default_rng(0)
    words = ["casa", "perro", "gato", "agua", "sol", "mar"], ["house", "dog", "cat", "water", "sun", "sea"]
    pairs = []
    for _ in range(300):
        idx = rng.integers(0, 6, rng.integers(2, 7))
        pairs.append((" ".join(words[0][i] for i in idx), " ".join(words[1][i] for i in idx)))
    write_pairs(tmp_path, pairs, "es", "en", "train")
    job = _job(
        dataset={"name": "toy_es_en", "path": str(tmp_path), "format": "parallel_text"},
        vocab=40,
        batch_tokens=64,
    )
    assert check_corpus(job)["dataset.languages"] == "es-en"
    batch = next(TranslationBatches(job, None))
    assert len(list(tmp_path.glob("bpe40-*.model"))) == 1  # cached beside the corpus, keyed by its digest
    assert 3 < batch.inputs["src"].max() < 40 and batch.units == np.count_nonzero(batch.targets["tgt_out"])


def test_missing_corpus_and_bad_names_are_one_line(tmp_path):
    job = _job(dataset={"name": "bible_es_en", "path": str(tmp_path / "none"), "format": "parallel_text"})
    with pytest.raises(CorpusMissing) as err:
        check_corpus(job)
    assert "prepare_translation.py" in str(err.value) and "apt-get install" in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="<corpus>_<src>_<tgt>"):
        languages("bible")


def test_host_source_counts_samples_per_unit_and_the_shapes_it_met():
    from dlbench.backends.skeleton import HostSource

    batches = TranslationBatches(_job(batch_tokens=0, batch_size=3, lengths="fixed"), None)
    source = HostSource(batches, lambda h: h)
    for _ in range(4):
        source.next()
    # 3 sentences of 15 tokens + EOS, all of one shape; synthetic: one epoch held as a pool
    assert source.facts() == {
        "samples_per_unit": round(1 / 16, 6),
        "batch_shapes": 1,
        "device_pool": len(batches.batches),
    }


def test_synthetic_batches_go_to_the_device_once_real_ones_every_step():
    """Synthetic translation batches are placed before timing and cycled (no host copy in the step,
    which waits for the GPU); a corpus's batches are placed at each step, as a user's loader does."""
    from dlbench.backends.skeleton import HostSource

    placed = []
    batches = TranslationBatches(_job(batch_tokens=0, batch_size=3, lengths="fixed"), None)
    source = HostSource(batches, lambda h: placed.append(h) or h)
    epoch = len(batches.batches)
    assert epoch > 1 and len(placed) == epoch  # all of them, before the first step
    handed = [source.next() for _ in range(2 * epoch + 1)]
    assert len(placed) == epoch  # none placed in the steps
    assert handed[:epoch] == placed and handed[epoch : 2 * epoch] == placed  # cycled in order
    assert source.units == sum(b.units for b in handed)

    real = HostSource(iter(placed[:3]), lambda h: placed.append(h) or h)
    assert not real.pool
    real.next()
    assert len(placed) == epoch + 1


def test_warm_up_covers_every_batch_shape_before_the_timed_windows():
    from dlbench.backends.skeleton import HostSource, SpecBench
    from dlbench.core.bench import TimedSource

    job = _job(batch_tokens=512, max_len=64)
    bench = SpecBench(job)
    bench.source = TimedSource(HostSource(bench.spec.batches(job, bench.spec), lambda h: h))
    shapes = bench.source.source.shapes
    assert shapes >= 4 and bench.warmup_steps(2) == shapes and bench.warmup_steps(100) == 100
    warm = {bench.source.next().inputs["src"].shape for _ in range(bench.warmup_steps(2))}
    timed = {bench.source.next().inputs["src"].shape for _ in range(200)}
    assert timed <= warm and len(warm) == shapes == bench.source.source.facts()["batch_shapes"]
    assert all(n * width <= 512 and width % 8 == 0 for n, width in warm)


def test_fixed_lengths_give_the_yardsticks_one_shape_and_no_tail_batch():
    """yardsticks/bare_transformer.py --min-len 64 --max-len 64 trains on 5120 // 64 = 80 sentences of 64
    tokens; the harness at model.lengths=fixed must do the same work at every step (on the H200 a tail
    batch of 16 sentences fell inside a timed window)."""
    batches = TranslationBatches(_job(batch_tokens=5120, max_len=64, lengths="fixed"), None)
    assert batches.shapes == 1
    assert {next(batches).inputs["src"].shape for _ in range(60)} == {(80, 64)}


def test_a_relative_corpus_path_not_found_here_is_taken_from_the_project_root(tmp_path, monkeypatch):
    """README's `dataset.path=data/bible` works from any directory, as every other dataset's path does."""
    from dlbench.core.names import PROJECT_ROOT
    from dlbench.workloads.translation.source import corpus_path

    monkeypatch.chdir(tmp_path)
    job = _job(dataset={"name": "bible_es_en", "path": "conf/dataset", "format": "parallel_text"})
    assert corpus_path(job) == PROJECT_ROOT / "conf" / "dataset"
    (tmp_path / "conf" / "dataset").mkdir(parents=True)  # found from the working directory: that one
    assert corpus_path(job) == tmp_path / "conf" / "dataset"
