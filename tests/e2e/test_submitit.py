"""Sweeps through hydra-submitit-launcher with the real CLI: submitit_local runs each job as a submitit job
(the path SLURM jobs take), all under the sweep's one parent run; SIGTERM to a job's process (what SLURM
sends at the time limit) ends that job KILLED and the sweep goes on; submitit_slurm without SLURM is one
line. Every job runs this checkout's code (its config-hash tag is new on this branch)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import TINY

pytestmark = pytest.mark.slow
LOCAL = ["hydra/launcher=submitit_local", *TINY]


def job_processes(sweep_dir: Path) -> list[psutil.Process]:
    """submitit's job processes of this sweep (`python -m submitit.core._submit <sweep>/.submitit/<id>`)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "submitit.core._submit" in cmd and any(str(sweep_dir) in c for c in cmd):
            found.append(p)
    return found


def test_a_submitit_local_sweep_lands_under_one_parent(cli):
    res = cli.run([*LOCAL, "mode=train,infer"])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    runs = cli.runs()
    parents = [r for r in runs if r.data.tags.get("dlbench.kind") == "sweep"]
    jobs = [r for r in runs if r.data.tags.get("dlbench.kind") == "job"]
    assert len(parents) == 1 and len(jobs) == 2
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["dlbench.jobs_finished"] == "2"  # counted from what the jobs returned
    assert {r.data.tags["mlflow.parentRunId"] for r in jobs} == {parent.info.run_id}
    assert sorted(r.data.params["mode"] for r in jobs) == ["infer", "train"]
    assert {r.info.status for r in jobs} == {"FINISHED"}
    assert all(r.data.tags.get("dlbench.config_hash") for r in jobs)  # this checkout's orchestrator ran
    submitted = [d for d in (cli.tmp / "sweep" / ".submitit").iterdir() if d.name.isdigit()]
    assert len(submitted) == 2  # each job went through submitit
    first, second = sorted(jobs, key=lambda r: r.info.start_time)
    assert first.info.end_time <= second.info.start_time  # one at a time on one machine


def test_sigterm_ends_a_job_killed_and_the_sweep_goes_on(cli):
    # job 0 would run for hours; job 1 is a normal smoke job
    proc = cli.popen([*LOCAL, "schedule.windows=100000,3"], OMP_NUM_THREADS="1")
    sweep_dir = cli.tmp / "sweep"
    try:
        deadline = time.monotonic() + 400
        while True:
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "job 0 never started its timed windows"
            running = [r for r in _runs(cli) if r.data.params.get("schedule.windows") == "100000"]
            if running and cli.client().get_metric_history(running[0].info.run_id, "window/throughput"):
                break
            time.sleep(1)
        (job,) = job_processes(sweep_dir)
        os.kill(job.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out[-3000:]
    assert "job 0" in out and "1 job(s) failed" in out
    by_windows = {
        r.data.params["schedule.windows"]: r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"
    }
    killed, other = by_windows["100000"], by_windows["3"]
    assert killed.info.status == "KILLED" and killed.data.tags["failure"] == "interrupted"
    assert cli.client().get_metric_history(
        killed.info.run_id, "window/throughput"
    )  # what it measured is kept
    assert other.info.status == "FINISHED"
    parent = next(r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "sweep")
    assert parent.info.status == "FAILED"
    assert not job_processes(sweep_dir)
    workers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "dlbench.worker" in (p.info["cmdline"] or []) and any(str(cli.tmp) in c for c in p.info["cmdline"])
    ]
    assert workers == []  # the killed job's worker went with it


def _runs(cli):
    try:
        return cli.runs()
    except AssertionError:  # the experiment is not created yet
        return []


def test_submitit_slurm_without_slurm_is_one_line(cli):
    res = cli.run(["hydra/launcher=submitit_slurm", *TINY], PATH="/usr/bin:/bin")
    assert res.returncode == 1
    assert "hydra/launcher=submitit_slurm needs SLURM (sbatch and srun not on PATH)" in res.stderr
    assert "Traceback" not in res.stderr
    (parent,) = cli.runs()
    assert parent.info.status == "FAILED"
