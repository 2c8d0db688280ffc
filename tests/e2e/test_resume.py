"""resume=true through the real CLI: a four-job sweep stopped halfway (SIGINT after two jobs finished) is
finished by running the same command again with resume=true, which runs only the missing jobs; the new
sweep's report counts the reused runs and says so."""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest

from tests.conftest import TINY

pytestmark = pytest.mark.slow
SWEEP = [*TINY, "framework=torch", "mode=train,infer", "precision=fp32,amp"]  # four jobs


def job_runs(cli) -> list:
    if not cli.db.exists():  # a client would create it, racing the CLI's own creation
        return []
    try:
        return [r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"]
    except AssertionError:  # no experiment yet
        return []


def test_resume_runs_only_the_missing_jobs(cli):
    proc = cli.popen(SWEEP, OMP_NUM_THREADS="1")
    try:
        deadline = time.monotonic() + 600
        while sum(r.info.status == "FINISHED" for r in job_runs(cli)) < 2:
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "two jobs never finished"
            time.sleep(1)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-3000:]
    first = job_runs(cli)
    done_first = {r.info.run_id for r in first if r.info.status == "FINISHED"}
    assert len(done_first) == 2 and len(first) <= 3  # the third job, if started, was KILLED

    res = cli.run([*SWEEP, "resume=true"], OMP_NUM_THREADS="1")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert (res.stdout + res.stderr).count("(resume=true): not run again") == 2
    after = job_runs(cli)
    new = [r for r in after if r.info.run_id not in {x.info.run_id for x in first}]
    assert len(new) == 2 and all(r.info.status == "FINISHED" for r in new)  # only the missing jobs ran
    finished = [r for r in after if r.info.status == "FINISHED"]
    hashes = Counter(r.data.tags["dlbench.config_hash"] for r in finished)
    assert len(hashes) == 4 and set(hashes.values()) == {1}  # every configuration measured exactly once

    parents = sorted(
        (r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "sweep"), key=lambda r: r.info.start_time
    )
    assert [p.info.status for p in parents] == ["KILLED", "FINISHED"]
    second = parents[1].info.run_id
    for run_id in done_first:
        assert second in cli.client().get_run(run_id).data.tags["dlbench.reused_by"]
    report = (cli.tmp / "sweep" / "report" / "report.md").read_text()
    assert "Jobs: 4 finished (2 reused from earlier sweeps, resume=true), 0 failed or unfinished" in report
    assert report.count("torch (reused)") == 2
