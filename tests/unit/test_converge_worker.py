"""mode=converge in each framework's real worker (`python -m dlbench.worker`, one subprocess each, side by
side): the small CNN trains on real digits (sklearn's, always installed), is scored on the held-out split
through Bench.predict after every epoch, and, started from the same seed, follows the same trajectory in
every framework (same initial weights, same batches in the same order)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dlbench.config import JobConfig
from tests.worker_jobs import framework_pythons, run_worker, worker_env

FRAMEWORKS = {"torch": "torch", "tf": "tensorflow", "mxnet": "mxnet", "jax": "jax"}
AMP = {"name": "amp", "autocast": True, "dtype": "float16", "cpu_dtype": "bfloat16", "loss_scale": "dynamic"}
THREADS = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


def converge_job(framework: str, precision: dict | None = None) -> JobConfig:
    return JobConfig.from_dict(
        {
            "framework": {"name": framework},
            "model": {
                "name": "small_cnn",
                "task": "classification",
                "image_size": 8,
                "channels": 1,
                "num_classes": 10,
            },
            "dataset": {"name": "digits", "format": "sklearn", "num_samples": 640},
            "precision": precision or {"name": "fp32"},
            "mode": "converge",
            "device": "cpu",
            "schedule": {"epochs": 2, "seed": 1, "batch_size": 32},
        }
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, list[dict], str]]:
    tmp = tmp_path_factory.mktemp("converge")
    pythons = framework_pythons(FRAMEWORKS)  # JAX's worker has its own environment
    jobs = {fw: converge_job(fw) for fw in pythons}
    if "torch" in jobs:
        jobs["torch-amp"] = converge_job("torch", AMP)
    env = worker_env(**THREADS)
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {
            name: pool.submit(
                run_worker, job, Path(tmp / f"{name}.json"), env, python=pythons[job.framework.name]
            )
            for name, job in jobs.items()
        }
        return {name: f.result() for name, f in futures.items()}


def _epochs(result: tuple[int, list[dict], str]) -> list[dict]:
    rc, events, stderr = result
    assert rc == 0, stderr[-3000:]
    return [e for e in events if e["event"] == "epoch"]


def test_each_framework_learns_and_reports_every_epoch(runs: dict) -> None:
    for name, result in runs.items():
        epochs = _epochs(result)
        assert [e["epoch"] for e in epochs] == [1, 2], name
        assert epochs[-1]["metric"] == "accuracy" and epochs[-1]["value"] > 0.5, (name, epochs)  # chance: 0.1
        assert epochs[1]["train_s"] > epochs[0]["train_s"] > 0
        windows = [e for e in result[1] if e["event"] == "window"]
        assert [w["samples"] for w in windows] == [640, 640]  # one timed window per epoch, 20 steps of 32
        done = next(e for e in result[1] if e["event"] == "done")
        facts = done["run"]
        assert facts["seed"] == 1 and facts["train_samples"] == 640
        assert facts["init"].startswith("numpy from seed") and facts["eval_samples"] == 360


def test_same_seed_same_trajectory_across_frameworks(runs: dict) -> None:
    """Same initial weights and batches: after one epoch the frameworks agree to within a few test images
    (float summation order differs, nothing else)."""
    first = {fw: _epochs(runs[fw])[0] for fw in FRAMEWORKS if fw in runs}
    if len(first) < 2:
        pytest.skip("needs two frameworks")
    values = [e["value"] for e in first.values()]
    assert max(values) - min(values) <= 0.03, first
    losses = [e["train_loss"] for e in first.values()]
    assert max(losses) - min(losses) <= 0.05 * max(losses), first


def test_amp_on_cpu_computes_in_bfloat16(runs: dict) -> None:
    if "torch-amp" not in runs:
        pytest.skip("torch is not installed")
    _epochs(runs["torch-amp"])
    done = next(e for e in runs["torch-amp"][1] if e["event"] == "done")
    assert done["precision"]["compute_dtype"] == "bfloat16"
