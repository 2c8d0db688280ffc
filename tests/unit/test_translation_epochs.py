"""mode=converge's translation source without a framework: the training pairs epoch after epoch in the
seed's order (whole batches of bounded shapes), the held-out sources for greedy decoding, and the way
predicted ids become text that sacrebleu scores against the references (BLEU registered as the translation workload's metric)."""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.config import JobConfig, validate
from dlbench.errors import ConfigError
from dlbench.workloads.registry import metric, task_spec
from dlbench.workloads.translation.epochs import TranslationEpochs, decode_cap
from dlbench.workloads.translation.parallel_text import CorpusMissing, write_pairs
from dlbench.workloads.translation.source import check_corpus
from dlbench.workloads.translation.spec import TranslationConfig
from dlbench.workloads.translation.transformer import EOS, PAD

WORDS = (
    ["casa", "perro", "gato", "agua", "sol", "mar", "pan", "luz"],
    ["house", "dog", "cat", "water", "sun", "sea", "bread", "light"],
)


def _pairs(rng: np.random.Generator, n: int, longest: int = 7) -> list[tuple[str, str]]:
    out = []
    for _ in range(n):
        idx = rng.integers(0, len(WORDS[0]), rng.integers(2, longest))
        out.append((" ".join(WORDS[0][i] for i in idx), " ".join(WORDS[1][i] for i in idx)))
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("toy_es_en")
    rng = np.random.default_rng(0)
    write_pairs(root, _pairs(rng, 400), "es", "en", "train")
    held = _pairs(rng, 30) + [(" ".join(["casa"] * 40), " ".join(["house"] * 40))]  # too long: left out
    write_pairs(root, held, "es", "en", "valid")
    return root, held


def _job(root, seed: int = 1, **model) -> JobConfig:
    cfg = TranslationConfig(**{"size": "tiny", "vocab": 40, "max_len": 24, "batch_tokens": 96, **model})
    job = JobConfig.from_dict(
        {
            "model": dict(cfg.__dict__),
            "dataset": {"name": "toy_es_en", "path": str(root), "format": "parallel_text"},
            "schedule": {"seed": seed},
        }
    )
    job.mode = "converge"
    return job


def _source(job: JobConfig) -> TranslationEpochs:
    return TranslationEpochs(job, task_spec(job.model), lambda host: host)


def test_converge_on_a_parallel_corpus_passes_the_checks_and_scores_bleu(corpus):
    validate(_job(corpus[0]))  # parallel_text is an in-memory format for mode=converge
    assert task_spec(_job(corpus[0]).model).metric == "bleu" and metric("bleu").name == "bleu"


def test_an_epoch_is_steps_per_epoch_whole_batches_in_the_seeds_order(corpus):
    source = _source(_job(corpus[0], seed=1))
    epoch0 = list(source.epoch_batches(0))
    assert len(epoch0) == source.steps_per_epoch == len(list(source.epoch_batches(1))) > 3
    for b in epoch0:
        n, width = b.inputs["src"].shape
        assert width % 8 == 0 and n == 96 // width and b.targets["tgt_out"].shape == (n, width)
        assert b.units == np.count_nonzero(b.targets["tgt_out"])
    again = [b.inputs["src"] for b in _source(_job(corpus[0], seed=1)).epoch_batches(0)]
    assert all(np.array_equal(a, b.inputs["src"]) for a, b in zip(again, epoch0, strict=True))
    other_epoch = [b.inputs["src"] for b in source.epoch_batches(1)]
    other_seed = [b.inputs["src"] for b in _source(_job(corpus[0], seed=2)).epoch_batches(0)]
    for other in (other_epoch, other_seed):
        assert not all(np.array_equal(a, b.inputs["src"]) for a, b in zip(other, epoch0, strict=True))
    # next() walks the epochs back to back
    walked = [source.next() for _ in range(source.steps_per_epoch + 1)]
    assert np.array_equal(walked[0].inputs["src"], epoch0[0].inputs["src"]) and source.epoch == 1


def test_eval_batches_hold_every_fitting_held_out_source_once_with_room_to_decode(corpus):
    root, held = corpus
    source = _source(_job(root))
    batches = list(source.eval_batches(8))
    sources = [row for b in batches for row in b.inputs["src"]]
    fits = [t for s, t in held if max(len(x) for x in source.bpe.encode([s, t])) <= source.max_len - 1]
    assert len(sources) == len(source.eval_labels) == len(fits) and 5 < len(fits) < len(held)
    assert sorted(source.eval_labels) == sorted(fits)  # the 40-word pair does not fit
    lengths = [int(np.count_nonzero(row)) for row in sources]
    assert lengths == sorted(lengths)  # shortest first: little padding while decoding
    for b in batches:
        assert (b.inputs["tgt_in"] == PAD).all() and b.units == 0
        assert b.inputs["tgt_in"].shape[1] == decode_cap(b.inputs["src"].shape[1])
    assert source.facts()["eval_samples"] == len(fits)
    job = _job(root)
    job.dataset.eval_samples = 5
    assert len(_source(job).eval_labels) == 5


def test_predicted_ids_become_text_and_bleu_is_100_for_the_references_0_for_nonsense(corpus):
    source = _source(_job(corpus[0]))
    bleu = metric("bleu").fn
    refs = source.eval_labels
    # what a perfect model would decode: each reference's ids, EOS, then PAD, as float (predict's dtype)
    ids = source.bpe.encode(refs)
    perfect = np.zeros((len(ids), max(map(len, ids)) + 3), dtype=np.float32)
    for i, row in enumerate(ids):
        perfect[i, : len(row) + 1] = [*row, EOS]
    halves = [perfect[:10], perfect[10:, :-1]]  # batches of different widths
    assert source.join_outputs(halves) == refs
    assert bleu(source.join_outputs(halves), refs) == pytest.approx(100.0)
    nonsense = np.full_like(perfect, source.bpe.encode(["zzz"])[0][0])
    assert bleu(source.join_outputs([nonsense]), refs) < 1.0


def test_converge_without_a_held_out_split_is_one_line_before_the_worker(tmp_path):
    write_pairs(tmp_path, _pairs(np.random.default_rng(0), 20), "es", "en", "train")
    with pytest.raises(CorpusMissing, match=r"valid\.es") as err:
        check_corpus(_job(tmp_path))
    assert "\n" not in str(err.value)


def test_misaligned_training_files_are_one_line_before_the_worker(tmp_path):
    """The orchestrator's check counts lines (cheap) before a worker trains BPE on the files."""
    pairs = _pairs(np.random.default_rng(0), 20)
    write_pairs(tmp_path, pairs, "es", "en", "train")
    write_pairs(tmp_path, pairs[:5], "es", "en", "valid")
    en = tmp_path / "train.en"
    en.write_text("\n".join(en.read_text(encoding="utf-8").splitlines()[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="train.es has 20 lines but train.en has 19") as err:
        check_corpus(_job(tmp_path))
    assert "\n" not in str(err.value) and not list(tmp_path.glob("bpe*"))


def test_a_corpus_with_nothing_that_fits_is_one_line(corpus):
    with pytest.raises(ConfigError, match="model.max_len=3") as err:
        _source(_job(corpus[0], max_len=3, batch_tokens=8))
    assert "\n" not in str(err.value)


def test_the_transformer_accuracy_preset_composes_and_validates(compose, corpus):
    cfg = compose(["+experiment=accuracy_transformer", f"dataset.path={corpus[0]}"], hydra=True)
    assert (cfg.mode, cfg.model.name, cfg.model.size, cfg.dataset.name) == (
        "converge", "transformer", "tiny", "bible_es_en"
    )  # fmt: skip
    assert dict(cfg.hydra.sweeper.params) == {"framework": "tf,torch,mxnet", "precision": "fp32,amp"}
    job = JobConfig.from_dict({k: v for k, v in dict(cfg).items() if k != "hydra"})
    validate(job)
    spec = task_spec(job.model)
    assert spec.metric == "bleu" and spec.optimizer.warmup_steps == job.model.warmup == 300
