"""The real worker (`python -m dlbench.worker`, torch, one subprocess) warms up over every batch shape of a
token-batched translation run before its timed windows, whatever schedule.warmup_steps asks for."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from dlbench.config import JobConfig  # noqa: E402
from tests.worker_jobs import run_worker, worker_env  # noqa: E402


def test_warm_up_is_at_least_one_step_per_batch_shape(tmp_path: Path):
    job = JobConfig.from_dict(
        {
            "framework": {"name": "torch"},
            "model": {
                "name": "transformer",
                "task": "translation",
                "size": "tiny",
                "vocab": 200,
                "batch_tokens": 256,
                "max_len": 48,
                "lengths": "lognormal",
            },  # fmt: skip
            "device": "cpu",
            "schedule": {"warmup_steps": 1, "steps_per_window": 3, "windows": 2},
        }
    )
    rc, events, stderr = run_worker(job, tmp_path / "job.json", worker_env(OMP_NUM_THREADS="1"))
    assert rc == 0, stderr[-3000:]
    (warm,) = [e for e in events if e["event"] == "warmup_done"]
    (done,) = [e for e in events if e["event"] == "done"]
    shapes = done["run"]["batch_shapes"]
    assert warm["steps"] == shapes >= 3  # 1 asked; every shape met in warm-up, none new in the windows
    assert len([e for e in events if e["event"] == "warmup_step"]) == shapes
    assert 0 < done["run"]["samples_per_unit"] < 1
