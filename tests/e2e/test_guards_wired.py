"""The GPU guards as a job uses them: a real job (the orchestrator in this process, a real torch worker in
its own) whose NVML reader is the recorded-readings one (there is no GPU here; the only stand-in this
project allows): another process on the GPU gives a tag and a warning, a throttling GPU a clock flag, the
energy counter the timed phase's energy; guard.exclusive=true refuses to start on a busy GPU."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from dlbench import orchestrator
from dlbench.config import JobConfig
from dlbench.orchestrator import JobContext, run_job
from dlbench.telemetry.guards import CLOCK_FLAG_TAG, FOREIGN_TAG, GPU_FLAG_TAG
from dlbench.tracking.sweep import SweepTally
from tests.recorded_nvml import RecordedNvml

pytestmark = pytest.mark.slow
HW_THERMAL_AND_POWER_CAP = float(0x40 | 0x4)


class CountingNvml(RecordedNvml):
    """Readings of a busy GPU at 300 W whose energy counter advances 30 J per reading."""

    def read(self) -> dict[str, float]:
        self.reads += 1
        return {
            "gpu0/util": 97.0,
            "gpu0/power_w": 300.0,
            "gpu0/sm_clock_mhz": 1755.0,
            "gpu0/clock_events": HW_THERMAL_AND_POWER_CAP,
            "gpu0/energy_mj": 1e9 + 30_000.0 * self.reads,
        }


@pytest.fixture
def other_process() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def job_in(tmp_path: Path, **extra) -> tuple[JobConfig, JobContext, str]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    job = JobConfig.from_dict(
        {
            "model": {
                "name": "resnet_cifar",
                "task": "classification",
                "image_size": 32,
                "batch_size": 2,
                "depth": 8,
            },
            # a timed phase of many sampling intervals: the clock and energy checks read only the samples
            # taken inside the timed windows, and a phase shorter than one interval may hold none
            "schedule": {"warmup_steps": 1, "steps_per_window": 10, "windows": 3},
            "telemetry": {"interval_s": 0.02},
            "tracking": {"uri": uri},
            "timeout_s": 300,
            "threads": 1,
        }
        | extra
    )
    ctx = JobContext(tmp_path / "job", [], "job [guards]", "{}\n")
    return job, ctx, uri


def use_reader(monkeypatch, reader: RecordedNvml) -> None:
    monkeypatch.setattr(
        orchestrator.NvmlReader, "open", classmethod(lambda cls, visible, count=1: (reader, ""))
    )


def test_a_shared_throttling_gpu_is_flagged_on_the_run(tmp_path, monkeypatch, other_process, caplog):
    reader = CountingNvml([{}], procs=[{other_process: 2048.0}])
    use_reader(monkeypatch, reader)
    job, ctx, uri = job_in(tmp_path)
    with caplog.at_level(logging.WARNING, logger="dlbench"):
        assert run_job(job, ctx, SweepTally()) == "FINISHED"
    (run,) = MlflowClient(uri).search_runs(["1"])
    tags, metrics = run.data.tags, run.data.metrics
    assert tags[GPU_FLAG_TAG] == "shared" and tags[FOREIGN_TAG].startswith(f"{other_process} python")
    assert tags[CLOCK_FLAG_TAG] == "throttled"
    assert tags["guard.clock_events"] == "hw_thermal 100%, sw_power_cap 100%"
    assert tags["gpu.gpu0_name"] == "NVIDIA H200 (recorded)"
    assert metrics["energy_j_power"] > 0 and metrics["energy_j_counter"] > 0
    assert metrics["energy_j_per_sample"] > 0
    assert "other processes used the GPU" in caplog.text and "the GPU throttled" in caplog.text
    assert reader.closed


def test_exclusive_refuses_a_busy_gpu_before_anything_runs(tmp_path, monkeypatch, other_process, caplog):
    use_reader(monkeypatch, RecordedNvml([{}], procs=[{other_process: 2048.0}]))
    job, ctx, uri = job_in(tmp_path, guard={"exclusive": True})
    with caplog.at_level(logging.ERROR, logger="dlbench"):
        assert run_job(job, ctx, SweepTally()) == "FAILED"
    assert f"guard.exclusive=true and the GPU is in use by {other_process}" in caplog.text
    assert not (tmp_path / "job" / "worker.log").exists()  # no worker was started
