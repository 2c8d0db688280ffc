"""The host facts a run records say how many CPUs the job could use (its affinity), not only the machine's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.worker_jobs import worker_env


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_cpu_count_follows_the_affinity_the_job_runs_under():
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from dlbench.environment import host_facts; f = host_facts(); print(f['cpu_count'], f['cpu_total'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=worker_env(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", str(os.cpu_count())]
