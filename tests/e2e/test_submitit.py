"""Sweeps through hydra-submitit-launcher with the real CLI. submitit_local runs each job as a submitit job,
one at a time, all under the sweep's one parent run; SIGTERM to a job's process (what SLURM sends at the time
limit) ends that job KILLED and the sweep goes on. submitit_slurm runs against a real one-node SLURM cluster
(Debian's slurm-wlm, private to the test): sbatch's script carries the time limit derived from timeout_s,
the environment's activation and the parent run's id, and `scancel --signal=TERM` ends a job KILLED. Without
SLURM, submitit_slurm is one line. Every job runs this checkout's code (its config-hash tag is new here)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import TINY
from tests.slurm_cluster import slurm_cluster

pytestmark = pytest.mark.slow
LOCAL = ["hydra/launcher=submitit_local", *TINY]
# the test cluster has no GPU and few CPUs: the preset's one GPU and 16 CPUs per job would never be scheduled
SLURM = [
    "hydra/launcher=submitit_slurm",
    "hydra.launcher.gpus_per_node=null",
    "hydra.launcher.cpus_per_task=1",
    *TINY,
]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as env:
        yield env


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
    jobs = assert_one_parent_all_finished(cli)
    first, second = sorted(jobs, key=lambda r: r.info.start_time)
    assert first.info.end_time <= second.info.start_time  # one at a time on one machine


def test_a_slurm_sweep_lands_under_one_parent(cli, slurm):
    res = cli.run([*SLURM, "mode=train,infer"], **slurm)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert_one_parent_all_finished(cli)
    (script,) = (cli.tmp / "sweep" / ".submitit").glob("*/*_submission.sh")
    text = script.read_text()
    assert "#SBATCH --time=15" in text  # timeout_s=300 (smoke): 5 minutes + 10 of margin
    assert "#SBATCH --signal=USR2@120" in text and "#SBATCH --array=0-1" in text
    assert f"source {sys.prefix}/bin/activate" in text
    parent = next(r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "sweep")
    assert f"export DLBENCH_PARENT_RUN_ID={parent.info.run_id}" in text


def test_scancel_sigterm_ends_a_slurm_job_killed(cli, slurm):
    proc = cli.popen([*SLURM, "schedule.windows=100000,3"], OMP_NUM_THREADS="1", **slurm)
    try:
        wait_for_windows(cli, proc)
        queue = subprocess.run(
            ["squeue", "-h", "-o", "%i %j", "--partition=test"],
            env=os.environ | slurm,
            capture_output=True,
            text=True,
        ).stdout.split()
        array_job = queue[0].split("_")[0]
        subprocess.run(["scancel", "--signal=TERM", f"{array_job}_0"], env=os.environ | slurm, check=True)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_killed_and_the_other_finished(cli, proc.returncode, out)


def assert_one_parent_all_finished(cli) -> list:
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
    logs = list((cli.tmp / "sweep" / ".submitit").glob("*/*_log.out"))
    assert len(logs) == 2  # each job went through submitit
    return jobs


def test_sigterm_ends_a_job_killed_and_the_sweep_goes_on(cli):
    # job 0 would run for hours; job 1 is a normal smoke job
    proc = cli.popen([*LOCAL, "schedule.windows=100000,3"], OMP_NUM_THREADS="1")
    try:
        wait_for_windows(cli, proc)
        (job,) = job_processes(cli.tmp / "sweep")
        os.kill(job.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_killed_and_the_other_finished(cli, proc.returncode, out)
    assert not job_processes(cli.tmp / "sweep")


def wait_for_windows(cli, proc, timeout: float = 400) -> None:
    """Until job 0 (schedule.windows=100000) has logged a timed window: its worker is measuring."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "job 0 never started its timed windows"
        running = [r for r in _runs(cli) if r.data.params.get("schedule.windows") == "100000"]
        if running and cli.client().get_metric_history(running[0].info.run_id, "window/throughput"):
            return
        time.sleep(1)


def assert_killed_and_the_other_finished(cli, returncode: int, out: str) -> None:
    assert returncode == 1, out[-3000:]
    assert "1 job(s) failed: job 0" in out
    jobs = [r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"]
    by_windows = {r.data.params["schedule.windows"]: r for r in jobs}
    killed, other = by_windows["100000"], by_windows["3"]
    assert killed.info.status == "KILLED" and killed.data.tags["failure"] == "interrupted"
    assert cli.client().get_metric_history(
        killed.info.run_id, "window/throughput"
    )  # what it measured is kept
    assert other.info.status == "FINISHED"
    parent = next(r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "sweep")
    assert parent.info.status == "FAILED"
    workers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "dlbench.worker" in (p.info["cmdline"] or []) and any(str(cli.tmp) in c for c in p.info["cmdline"])
    ]
    assert workers == []  # the killed job's worker went with it


def _runs(cli):
    if not cli.db.exists():  # a client would create it, racing the CLI's own creation
        return []
    try:
        return cli.runs()
    except AssertionError:  # the experiment is not created yet
        return []


def test_submitit_slurm_without_slurm_is_one_line(cli):
    empty = cli.tmp / "bin"
    empty.mkdir()
    res = cli.run(["hydra/launcher=submitit_slurm", *TINY], PATH=str(empty))
    assert res.returncode == 1
    assert "hydra/launcher=submitit_slurm needs SLURM (sbatch and srun not on PATH)" in res.stderr
    assert "Traceback" not in res.stderr
    (parent,) = cli.runs()
    assert parent.info.status == "FAILED"
