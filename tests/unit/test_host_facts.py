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


def test_the_cpu_is_named_by_its_model_where_linux_gives_one():
    from dlbench.core.cpu import cpu_model
    from dlbench.environment import host_facts

    model = cpu_model()
    if model is None:
        pytest.skip("no /proc/cpuinfo model name here")
    assert host_facts()["cpu"] == model and model not in ("x86_64", "aarch64")
