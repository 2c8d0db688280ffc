"""A job on two devices through the real CLI: torch ranks over gloo on the CPU, recorded, reported, and
gone after a SIGTERM to the sweep; JAX's one process over a mesh of two host devices, recorded and
reported."""

from __future__ import annotations

import signal
import time

import psutil
import pytest

from dlbench.backends.interpreter import worker_python
from dlbench.config import JaxConfig
from dlbench.errors import ConfigError
from tests.conftest import TINY
from tests.e2e.test_cli import children_of, sweep_parent, workers_under
from tests.e2e.test_trust import Started

pytestmark = pytest.mark.slow


def test_a_sweep_over_devices_records_both_runs_and_reports_the_scaling(cli):
    res = cli.run([*TINY, "devices=1,2"])
    assert res.returncode == 0, res.stderr[-3000:]
    runs = cli.runs()
    parent = sweep_parent(runs)
    kids = {r.data.params["devices"]: r for r in children_of(runs, parent.info.run_id)}
    assert sorted(kids) == ["1", "2"]
    assert all(r.info.status == "FINISHED" and r.data.metrics["throughput"] > 0 for r in kids.values())
    one, two = kids["1"].data.params, kids["2"].data.params
    assert int(two["global_batch_size"]) == 2 * int(two["batch_size"]) == 2 * int(one["batch_size"])
    assert one["global_batch_size"] == one["batch_size"] and "ranks.backend" not in one
    assert two["ranks.backend"] == "gloo" and two["ranks.world_size"] == "2"
    # two ranks share the job's CPUs: each got half (at least one), as its torch reports
    per_rank = two["ranks.rank_threads"].split(",")
    assert len(per_rank) == 2 and len(set(per_rank)) == 1
    assert int(two["threads.intra_op"]) == max(1, int(one["threads.intra_op"]) // 2)
    report = (cli.tmp / "sweep" / "report" / "report.md").read_text()
    assert "## Scaling over devices" in report
    assert "torch resnet_cifar fp32 train: 2 devices" in report and "scaling efficiency" in report


def test_two_ranks_agree_on_the_steps_min_timed_s_gives_their_windows(cli):
    # each rank probes its own step: were their counts to differ, one would wait in a collective for ever
    res = cli.run([*TINY, "devices=2", "schedule.min_timed_s=1", "timeout_s=180"], multirun=False)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = cli.runs()
    assert run.info.status == "FINISHED" and run.data.params["ranks.world_size"] == "2"
    assert run.data.metrics["steps_per_window"] > int(run.data.params["schedule.steps_per_window"])


def test_a_jax_sweep_over_devices_runs_one_process_over_a_mesh_and_reports_the_scaling(cli):
    try:
        worker_python(JaxConfig())
    except ConfigError as exc:
        pytest.skip(str(exc))
    res = cli.run(["framework=jax", "threads=1", *TINY, "devices=1,2"], timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    runs = cli.runs()
    kids = {r.data.params["devices"]: r for r in children_of(runs, sweep_parent(runs).info.run_id)}
    assert sorted(kids) == ["1", "2"]
    assert all(r.info.status == "FINISHED" and r.data.metrics["throughput"] > 0 for r in kids.values())
    one, two = kids["1"].data.params, kids["2"].data.params
    assert int(two["global_batch_size"]) == 2 * int(two["batch_size"]) == 2 * int(one["batch_size"])
    assert "ranks.backend" not in one and "mesh_devices" not in str(one)
    assert two["ranks.backend"] == "jax.sharding" and two["ranks.world_size"] == "2"
    assert two["ranks.mesh_devices"] == "cpu:0,cpu:1"
    # one process for both devices on the job's one CPU: XLA's pool has a thread per host device
    assert one["threads.intra_op"] == "1" and two["threads.intra_op"] == "2"
    assert len(workers_under(cli.tmp)) == 0
    report = (cli.tmp / "sweep" / "report" / "report.md").read_text()
    assert "## Scaling over devices" in report
    assert "jax resnet_cifar fp32 train: 2 devices" in report and "scaling efficiency" in report


def _ranks_under(cli) -> list[psutil.Process]:
    return [p for p in workers_under(cli.tmp) if "--rank" in (p.info["cmdline"] or [])]


def test_a_sigterm_during_a_two_device_job_leaves_no_rank_behind(cli):
    started = Started(cli, [*TINY, "devices=2", "schedule.windows=100000"])
    try:
        started.wait_for(r"window 1/")  # both ranks are training
        workers = workers_under(cli.tmp)
        assert len(workers) == 2 and len(_ranks_under(cli)) == 1, [p.info["cmdline"] for p in workers]
        started.proc.send_signal(signal.SIGTERM)
        code = started.finish(timeout=120)
        assert code == 128 + signal.SIGTERM, started.output[-3000:]
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert alive == [] and workers_under(cli.tmp) == []
        (kid,) = children_of(cli.runs(), sweep_parent(cli.runs()).info.run_id)
        assert kid.info.status == "KILLED" and kid.data.params["devices"] == "2"
    finally:
        started.kill()


def test_a_rank_that_fails_before_the_rendezvous_ends_the_job_at_once(cli):
    """Rank 1 exits at start: rank 0 must not wait in the rendezvous for the job's timeout (600 s here)."""
    t0 = time.monotonic()
    res = cli.run([*TINY, "devices=2", "timeout_s=600", "debug.fault=rank_exit"], multirun=False)
    took = time.monotonic() - t0
    assert res.returncode != 0 and took < 120, (took, (res.stdout + res.stderr)[-3000:])
    (run,) = cli.runs()
    tags = run.data.tags
    assert run.info.status == "FAILED" and tags["failure"] == "crash", tags
    assert "rank 1 of 2 exited with code 1 before the job ended" in tags["failure.message"]
    assert workers_under(cli.tmp) == []


def test_a_tf_sweep_over_devices_mirrors_one_process_over_two_cpu_devices(cli):
    small = ["+experiment=smoke", "model=small_cnn", "model.image_size=8", "schedule.batch_size=4"]
    res = cli.run([*small, "framework=tf", "threads=2", "devices=1,2"])
    assert res.returncode == 0, res.stderr[-3000:]
    runs = cli.runs()
    kids = {r.data.params["devices"]: r for r in children_of(runs, sweep_parent(runs).info.run_id)}
    assert sorted(kids) == ["1", "2"]
    assert all(r.info.status == "FINISHED" and r.data.metrics["throughput"] > 0 for r in kids.values())
    one, two = kids["1"].data.params, kids["2"].data.params
    assert (two["batch_size"], two["global_batch_size"]) == ("4", "8") and "ranks.backend" not in one
    assert two["ranks.backend"] == "tf.distribute.MirroredStrategy (ReductionToOneDevice)"
    assert two["ranks.world_size"] == "2" and two["ranks.devices"] == "CPU:0,CPU:1"
    # one process: its two replicas share the job's threads, not split as torch's ranks are
    assert two["threads.intra_op"] == one["threads.intra_op"] == "2"
    report = (cli.tmp / "sweep" / "report" / "report.md").read_text()
    assert "tf small_cnn fp32 train: 2 devices" in report and "scaling efficiency" in report
