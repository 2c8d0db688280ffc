"""mode=converge for translation through the real CLI and MLflow: the tiny Transformer trained on a small
word-for-word parallel corpus learns to translate, scored after each epoch by sacrebleu BLEU on greedy
translations of the held-out pairs (eval/bleu, 0-100), one MLflow run with the corpus facts."""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.workloads.translation.parallel_text import write_pairs

pytestmark = pytest.mark.slow

WORDS = (
    ["casa", "perro", "gato", "agua", "sol", "mar", "pan", "luz", "rey", "pueblo"],
    ["house", "dog", "cat", "water", "sun", "sea", "bread", "light", "king", "people"],
)


def _pairs(rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
    out = []
    for _ in range(n):
        idx = rng.integers(0, len(WORDS[0]), rng.integers(2, 6))
        out.append((" ".join(WORDS[0][i] for i in idx), " ".join(WORDS[1][i] for i in idx)))
    return out


def test_converge_on_a_parallel_corpus_learns_to_translate_and_logs_bleu(cli, tmp_path):
    rng = np.random.default_rng(0)
    corpus = tmp_path / "corpus"
    write_pairs(corpus, _pairs(rng, 1200), "es", "en", "train")
    write_pairs(corpus, _pairs(rng, 60), "es", "en", "valid")
    overrides = [
        "framework=torch",
        "model=transformer",
        "dataset=bible_es_en",  # any two-file es -> en corpus: the languages come from the name
        f"dataset.path={corpus}",
        "mode=converge",
        "model.size=tiny",
        "model.vocab=96",  # one piece per word,
        "model.max_len=16",
        "model.batch_tokens=128",
        "model.warmup=100",
        "model.lr=0.001",
        "model.dropout=0",
        "schedule.epochs=3",
        "schedule.seed=3",
        "threads=1",
        "telemetry.interval_s=0.5",
    ]
    res = cli.run(overrides, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = [r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"]
    m, t = run.data.metrics, run.data.tags
    assert run.info.status == "FINISHED" and t["dlbench.eval_metric"] == "bleu"
    history = sorted((p.step, p.value) for p in cli.client().get_metric_history(run.info.run_id, "eval/bleu"))
    assert [step for step, _ in history] == [1, 2, 3] and history[-1][1] == m["eval_final"]
    # BLEU in points (95 measured; a perfect score comes out of sacrebleu as 100 plus a rounding error),
    # an untrained model scores ~1
    assert 50.0 < m["eval_final"] <= 100.0 + 1e-9
    assert int(t["run.eval_samples"]) == 60 and int(t["run.train_samples"]) == 1200
    assert t["run.seed"] == "3" and "greedy" in t["run.decoding"] and m["throughput"] > 0


def test_evaluation_decodes_the_same_in_one_compiled_call(cli, tmp_path):
    """TF under XLA, one sweep over model.decode_loop=host,device from one seed: the evaluation's greedy
    translations (read back from the device by the bench where the one-call decode leaves them) score the
    same BLEU after every epoch as the host loop's."""
    rng = np.random.default_rng(0)
    corpus = tmp_path / "corpus"
    write_pairs(corpus, _pairs(rng, 1200), "es", "en", "train")
    write_pairs(corpus, _pairs(rng, 60), "es", "en", "valid")
    overrides = [
        "framework=tf", "execution=compiled", "model=transformer", "dataset=bible_es_en", f"dataset.path={corpus}",
        "mode=converge", "model.size=tiny", "model.vocab=96", "model.max_len=16", "model.batch_tokens=128",
        "model.warmup=100", "model.lr=0.001", "model.dropout=0", "schedule.epochs=2", "schedule.seed=3",
        "threads=1", "model.decode_loop=host,device",
    ]  # fmt: skip
    res = cli.run(overrides, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = {
        r.data.params["model.decode_loop"]: r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"
    }
    assert sorted(runs) == ["device", "host"]
    bleu = {
        loop: [p.value for p in sorted(cli.client().get_metric_history(r.info.run_id, "eval/bleu"), key=lambda p: p.step)]
        for loop, r in runs.items()
    }  # fmt: skip
    assert len(bleu["host"]) == 2 and bleu["host"][-1] > 50.0  # it learnt to translate
    assert bleu["device"] == bleu["host"]
    assert runs["device"].data.tags["run.decode_loop"] == "device"
