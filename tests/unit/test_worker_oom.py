"""An out-of-memory failure's one line names the batch that did not fit and the setting that lowers it:
training and inference step schedule.batch_size (the model's own where unset), serving steps at most
serve.max_batch under LoadGen."""

from __future__ import annotations

import pytest

from dlbench.config import JobConfig
from dlbench.worker import is_oom, oom_fix


@pytest.mark.parametrize(
    ("plain", "fix"),
    [
        ({"mode": "train", "schedule": {"batch_size": 48}}, "schedule.batch_size=48"),
        ({"mode": "infer", "model": {"name": "ncf", "batch_size": 4096}}, "schedule.batch_size=4096"),
        ({"mode": "serve", "schedule": {"batch_size": 48}, "serve": {"max_batch": 16}}, "serve.max_batch=16"),
    ],
)
def test_the_fix_names_the_batch_that_did_not_fit(plain, fix):
    assert oom_fix(JobConfig.from_dict(plain)) == f"out of memory at {fix}: lower it"


@pytest.mark.parametrize(
    ("framework", "pool", "offered"),
    [("jax", "false", True), ("jax", "0", True), ("jax", "true", False), ("torch", "false", False)],
)
def test_a_jax_job_on_a_growing_pool_is_offered_the_pool_taken_whole(monkeypatch, framework, pool, offered):
    """A grown XLA pool keeps its regions: one large block can find no room though little is in use."""
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", pool)
    line = oom_fix(JobConfig.from_dict({"framework": {"name": framework}, "schedule": {"batch_size": 128}}))
    assert line.startswith("out of memory at schedule.batch_size=128: lower it")
    assert ("XLA_PYTHON_CLIENT_PREALLOCATE=true" in line) is offered


@pytest.mark.parametrize(
    ("exc", "oom"),
    [
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 33.97GiB"), True),
        (MemoryError(), True),
        (RuntimeError("shape mismatch"), False),
    ],
)
def test_out_of_memory_is_told_from_a_crash(exc, oom):
    assert is_oom(exc) is oom
