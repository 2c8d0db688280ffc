"""mode=converge without a framework: the summary of epoch events, the checks before a worker starts,
one job per seed, the in-memory source's order, and the presets through real Hydra composition."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dlbench.config import JobConfig, validate
from dlbench.converge import converge_summary, diverged
from dlbench.core.bench import Batch
from dlbench.data.epochs import EpochPlan
from dlbench.data.validate import check_dataset
from dlbench.errors import ConfigError
from dlbench.orchestrator import JobContext, per_seed
from dlbench.workloads.classification.memory_source import MemorySource
from dlbench.workloads.registry import task_spec


def epoch(n: int, value: float, loss: float = 0.5) -> dict:
    return {
        "epoch": n,
        "metric": "accuracy",
        "value": value,
        "train_loss": loss,
        "train_s": 10.0 * n,
        "eval_s": 1.0,
    }


def test_summary_final_best_and_time_to_target() -> None:
    events = [epoch(1, 0.70), epoch(2, 0.86), epoch(3, 0.84)]
    out = converge_summary(events, target=0.85)
    assert out["eval_final"] == 0.84 and out["eval_best"] == 0.86 and out["eval_best_epoch"] == 2
    assert (out["epochs_to_target"], out["time_to_target_s"], out["train_s"]) == (2, 20.0, 30.0)
    assert "epochs_to_target" not in converge_summary(events, target=0.9)
    assert "epochs_to_target" not in converge_summary(events, target=None)
    assert converge_summary([], 0.5) == {}
    assert not diverged(events)


def test_summary_of_a_diverged_run() -> None:
    events = [epoch(1, 0.70), epoch(2, math.nan, loss=math.nan)]
    out = converge_summary(events, target=0.6)
    assert math.isnan(out["eval_final"]) and out["eval_best"] == 0.70 and out["epochs_to_target"] == 1
    assert diverged(events)
    assert diverged([epoch(1, 0.7, loss=math.inf)])


def converge_job(**dataset) -> JobConfig:
    job = JobConfig.from_dict(
        {
            "model": {
                "name": "small_cnn",
                "task": "classification",
                "image_size": 28,
                "channels": 1,
                "num_classes": 10,
            },
            "dataset": {"name": "digits", "format": "sklearn"} | dataset,
            "mode": "converge",
            "schedule": {"epochs": 2, "seed": 4, "batch_size": 16},
        }
    )
    return job


def test_checks_before_the_worker_are_one_line() -> None:
    job = converge_job()
    validate(job)
    with pytest.raises(ConfigError, match=r"dataset=digits has 8x8x1 images .* model.image_size=8"):
        check_dataset(job)
    job.model.image_size = 8
    facts = check_dataset(job)
    assert facts["dataset.train_samples"] == 1_437 and facts["dataset.resolved_path"].endswith(
        "digits.csv.gz"
    )
    job.dataset.eval_samples = 400
    with pytest.raises(ConfigError, match=r"dataset.eval_samples=400: dataset=digits has 360"):
        check_dataset(job)
    synthetic = JobConfig.from_dict({"mode": "converge"})
    with pytest.raises(
        ConfigError,
        match=r"held in memory: use a dataset of format idx \(dataset=fashion_mnist\) or sklearn \(dataset=digits\)",
    ) as err:
        validate(synthetic)
    assert "\n" not in str(err.value)
    for key, value, message in (
        ("epochs", 0, "schedule.epochs"),
        ("seeds", [1, -2], "seeds must be 0 or more"),
        ("repeats", 2, r"use schedule.seeds=\[...\] instead"),
    ):
        bad = converge_job()
        setattr(bad.schedule, key, value)
        with pytest.raises(ConfigError, match=message):
            validate(bad)


def test_one_job_per_seed(tmp_path: Path) -> None:
    ctx = JobContext(tmp_path, ["x=1"], "job 0 [torch small_cnn fp32 converge]", "cfg")
    job = converge_job()
    assert per_seed(job, ctx) == [(job, ctx)]  # no seeds list: the job as it is (seed 4)
    job.schedule.seeds = [1, 2, 3]
    runs = per_seed(job, ctx)
    assert [j.schedule.seed for j, _ in runs] == [1, 2, 3]
    assert [c.output_dir.name for _, c in runs] == ["seed1", "seed2", "seed3"]
    assert runs[1][1].label.endswith("seed=2") and runs[0][0] is not job and job.schedule.seed == 4
    train = JobConfig.from_dict({"schedule": {"seeds": [1, 2]}})
    assert per_seed(train, ctx) == [(train, ctx)]  # only mode=converge runs per seed


def test_memory_source_follows_the_seeded_plan() -> None:
    job = converge_job(num_samples=100, eval_samples=50)
    job.model.image_size = 8
    source = MemorySource(
        job,
        task_spec(job.model),
        lambda host: Batch((host.inputs["image"],), (host.targets["label"],), host.units),
    )
    assert source.steps_per_epoch == 6  # 100 // 16
    plan = EpochPlan(4, 16)
    labels = source.data.train_labels
    got = [source.next() for _ in range(source.steps_per_epoch + 1)]
    assert got[0].inputs[0].shape == (16, 1, 8, 8) and got[0].units == 16
    np.testing.assert_array_equal(got[0].targets[0], labels[plan.order(0, 100)[:16]])
    np.testing.assert_array_equal(got[-1].targets[0], labels[plan.order(1, 100)[:16]])  # epoch 2 begins
    assert source.epoch == 1
    evals = list(source.eval_batches(32))
    assert [b.units for b in evals] == [32, 18]
    np.testing.assert_array_equal(np.concatenate([b.targets["label"] for b in evals]), source.eval_labels)
    assert source.facts()["seed"] == 4 and source.facts()["augmentation"] == "none"


def test_presets_compose(compose) -> None:
    cpu = compose(["+experiment=accuracy"], hydra=True)
    assert cpu.mode == "converge" and cpu.model.name == "small_cnn" and cpu.dataset.name == "fashion_mnist"
    assert list(cpu.schedule.seeds) == [1, 2, 3] and cpu.schedule.epochs == 2
    assert dict(cpu.hydra.sweeper.params) == {"framework": "tf,torch,mxnet", "precision": "fp32,amp"}
    gpu = compose(["+experiment=accuracy_gpu"], hydra=True)
    assert gpu.device == "cuda" and gpu.dataset.num_samples is None and len(gpu.schedule.seeds) == 5
    digits = compose(["mode=converge", "model=small_cnn", "dataset=digits", "model.image_size=8"])
    job = JobConfig.from_dict(dict(digits))
    validate(job)
    assert check_dataset(job)["dataset.eval_samples_used"] == 360
