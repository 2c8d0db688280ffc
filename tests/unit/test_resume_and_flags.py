"""resume=true's pieces (configuration hash, finding a FINISHED run, marking it reused) and how the report
shows reused runs and the GPU guards' flags, against a real sqlite MLflow store."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlbench.config import JobConfig
from dlbench.report import build_report
from dlbench.report.analysis import analyze, span_text
from dlbench.report.load import select
from dlbench.report.render import FLAG, REUSED, SHARED, findings_block, result_table
from dlbench.telemetry.guards import CLOCK_FLAG_TAG, GPU_FLAG_TAG
from dlbench.tracking.resume import (
    CONFIG_HASH_TAG,
    REUSED_BY_TAG,
    config_hash,
    find_finished,
    mark_reused,
    reuse_finished,
)
from dlbench.tracking.store import open_store
from tests.unit.test_report import log_job, make_sweep


def job(**over) -> dict:
    return JobConfig.from_dict(over).to_dict()


def test_config_hash_follows_what_is_measured():
    base = job(precision={"name": "amp"})
    assert config_hash(base) == config_hash(dict(reversed(base.items())))  # key order is irrelevant
    assert config_hash(base) != config_hash(job(precision={"name": "fp32"}))
    assert config_hash(base) != config_hash(job(precision={"name": "amp"}, schedule={"windows": 3}))
    elsewhere = job(
        precision={"name": "amp"}, tracking={"uri": "http://h:5050"}, timeout_s=60, fail_fast=True
    )
    assert config_hash(base) == config_hash(elsewhere)  # where it is recorded and the limits do not count


def test_find_finished_ignores_failed_and_other_configurations(tmp_path: Path):
    client, eid = open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "dlbench")
    h = config_hash(job())
    failed = log_job(
        client, eid, None, "torch resnet50 fp32 train", None, "FAILED", tags={CONFIG_HASH_TAG: h}
    )
    assert find_finished(client, eid, h) is None
    other = log_job(
        client, eid, None, "torch resnet50 amp train", (1, 2, 3), tags={CONFIG_HASH_TAG: "x" * 20}
    )
    ok = log_job(client, eid, None, "torch resnet50 fp32 train", (1, 2, 3), tags={CONFIG_HASH_TAG: h})
    found = find_finished(client, eid, h)
    assert found is not None and found.info.run_id == ok
    assert {failed, other}.isdisjoint({found.info.run_id})


def test_only_a_run_of_this_machine_is_reused(tmp_path: Path):
    """One store, two machines (a shared server): the configuration's hash is the same, the hardware is
    not. An H100 job never reuses the H200's newer run, and a machine with no run of its own runs it."""
    client, eid = open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "dlbench")
    h = config_hash(job())
    cpu = {"host.cpu": "Intel(R) Xeon(R) Processor", "host.cpu_count": "16"}
    h100, h200 = cpu | {"gpu.gpu0_name": "NVIDIA H100 80GB HBM3"}, cpu | {"gpu.gpu0_name": "NVIDIA H200"}
    on_h100 = log_job(
        client, eid, None, "torch resnet50 fp32 train", (1, 2, 3), tags={CONFIG_HASH_TAG: h} | h100
    )
    log_job(client, eid, None, "torch resnet50 fp32 train", (1, 2, 3), tags={CONFIG_HASH_TAG: h} | h200)
    assert find_finished(client, eid, h, h100).info.run_id == on_h100  # not the newer H200 run
    assert reuse_finished(client, eid, h, "p1", cpu | {"gpu.gpu0_name": "NVIDIA A100-SXM4-80GB"}) is None
    assert find_finished(client, eid, h, cpu | {"host.cpu_count": "8"}) is None  # fewer CPUs: not this one


def test_a_run_of_this_machine_behind_a_hundred_of_another_is_still_found(tmp_path: Path):
    """The search pages on: a shared store's other machine may have a hundred newer runs of one hash."""
    client, eid = open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "dlbench")
    h = config_hash(job())
    mine = {"host.cpu": "Intel(R) Xeon(R) Processor", "host.cpu_count": "16"}
    old = log_job(client, eid, None, "torch resnet50 fp32 train", (1, 2, 3), tags={CONFIG_HASH_TAG: h} | mine)
    for _ in range(101):
        run = client.create_run(eid, tags={CONFIG_HASH_TAG: h} | mine | {"host.cpu_count": "8"})
        client.set_terminated(run.info.run_id, "FINISHED")
    assert find_finished(client, eid, h, mine).info.run_id == old


def test_reuse_marks_each_sweep_once(tmp_path: Path):
    client, eid = open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "dlbench")
    h = config_hash(job())
    assert reuse_finished(client, eid, h, "p0") is None  # nothing to reuse: the job runs
    run_id = log_job(client, eid, None, "torch resnet50 fp32 train", (1, 2, 3), tags={CONFIG_HASH_TAG: h})
    for parent in ("p1", "p2", "p1"):
        assert reuse_finished(client, eid, h, parent) == run_id
    assert client.get_run(run_id).data.tags[REUSED_BY_TAG] == "p1,p2"
    assert reuse_finished(client, eid, h, None) == run_id  # a single run: nothing to mark


def test_a_resumed_sweep_reports_its_reused_runs_and_says_so(tmp_path: Path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    first = make_sweep(client, eid, "precision=fp32,amp")
    fp32 = log_job(client, eid, first.run_id, "torch resnet50 fp32 train", (95, 100, 105))
    log_job(client, eid, first.run_id, "torch resnet50 amp train", None, "KILLED")
    first.finish("KILLED")
    second = make_sweep(client, eid, "precision=fp32,amp resume=true")
    mark_reused(client, client.get_run(fp32), second.run_id)
    log_job(client, eid, second.run_id, "torch resnet50 amp train", (190, 200, 210))
    second.finish("FINISHED")

    analysis = analyze(select(client, uri, run_id=second.run_id).jobs)
    assert analysis.failed == [] and analysis.reused == 1
    [group] = analysis.groups
    rows = {r[2]: r[0] for r in result_table(group, show_spread=False).rows}  # precision: framework
    assert rows == {"fp32": f"torch {REUSED}", "amp": "torch"}
    (claim,) = [f.text for f in analysis.findings if "amp" in f.text and "2.00×" in f.text]
    # compared across sweeps only with a caveat naming the reused run
    assert (
        "Caveat: these runs were measured in different sweeps (first to last start: under 1 min); reused "
        f"from an earlier sweep (resume=true): torch fp32 (run {fp32[:8]})" in claim
    )
    assert any("reused" in p for p in findings_block(analysis).paragraphs)
    report = build_report(client, uri, tmp_path / "report", run_id=second.run_id)
    assert "Jobs: 2 finished (1 reused from earlier sweeps, resume=true)" in report.markdown.read_text()
    first_jobs = select(client, uri, run_id=first.run_id).jobs  # the first sweep is unchanged
    assert sorted(j.status for j in first_jobs) == ["FINISHED", "KILLED"] and not any(
        j.reused for j in first_jobs
    )


@pytest.mark.parametrize(
    ("ms", "text"),
    [(20_000, "under 1 min"), (26 * 60_000, "26 min"), (5 * 3_600_000, "5 h"), (9 * 86_400_000, "9 days")],
)
def test_the_sweeps_caveat_says_how_far_apart_they_were(ms, text):
    assert span_text(ms) == text


def test_noisy_gpu_runs_are_marked_and_make_no_claim(tmp_path: Path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "framework=tf,torch precision=fp32,amp")
    log_job(client, eid, sweep.run_id, "torch resnet50 fp32 train", (95, 100, 105))
    log_job(client, eid, sweep.run_id, "tf resnet50 fp32 train", (45, 50, 55), tags={GPU_FLAG_TAG: "shared"})
    log_job(client, eid, sweep.run_id, "torch resnet50 amp train", (190, 200, 210))
    clock = {CLOCK_FLAG_TAG: "throttled,clock-drop"}
    log_job(client, eid, sweep.run_id, "tf resnet50 amp train", (90, 100, 110), tags=clock)
    sweep.finish("FINISHED")
    analysis = analyze(select(client, uri, run_id=sweep.run_id).jobs)
    [group] = analysis.groups
    cells = {(r[0], r[2]): r[3] for r in result_table(group, show_spread=False).rows}  # (fw, precision)
    assert cells[("tf", "fp32")] == f"50.0 {FLAG} {SHARED}"
    assert cells[("tf", "amp")] == f"100 {FLAG} throttled,clock-drop"
    assert cells[("torch", "amp")] == "200"
    texts = [f.text for f in analysis.findings]
    assert not [t for t in texts if "tf" in t]  # torch is "2x faster" than a tf run on a shared GPU: no claim
    assert any("torch" in t and "2.00×" in t for t in texts)  # the sound runs still compare
    assert any("shared" in p and "left out of the findings" in p for p in findings_block(analysis).paragraphs)
    frame = analysis.frame().set_index(["framework", "precision"])
    assert (
        frame.loc[("tf", "fp32"), "gpu_flag"] == "shared" and frame.loc[("torch", "fp32"), "gpu_flag"] == ""
    )


def test_runs_of_one_sitting_get_no_caveat_and_a_report_made_before_the_close_shows_the_coming_status(
    tmp_path: Path,
):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "precision=fp32,amp")
    log_job(client, eid, sweep.run_id, "torch resnet50 fp32 train", (95, 100, 105))
    log_job(client, eid, sweep.run_id, "torch resnet50 amp train", (190, 200, 210))
    analysis = analyze(select(client, uri, run_id=sweep.run_id).jobs)
    assert analysis.findings and not any("Caveat" in f.text for f in analysis.findings)
    assert client.get_run(sweep.run_id).info.status == "RUNNING"  # as when the sweep writes its report
    coming = build_report(client, uri, tmp_path / "r1", run_id=sweep.run_id, parent_status="FINISHED")
    assert f"`{sweep.run_id}` (FINISHED)" in coming.markdown.read_text()
    now = build_report(client, uri, tmp_path / "r2", run_id=sweep.run_id)  # a report asked for meanwhile
    assert f"`{sweep.run_id}` (RUNNING)" in now.markdown.read_text()
