"""mode=serve through the real CLI: LoadGen's queries answered by a framework's inference step, its own
summary recorded, its figures logged exactly as it printed them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY

pytestmark = pytest.mark.slow
PERCENTILE = re.compile(r"^90\.00 percentile latency \(ns\)\s*:\s*(\d+)\s*$", re.M)


def _summary(cli, run) -> str:
    where = cli.client().download_artifacts(run.info.run_id, "loadgen/mlperf_log_summary.txt")
    return Path(where).read_text()


def test_single_stream_and_offline_log_loadgens_own_percentiles(cli):
    # threads=1: on a loaded 2-core machine two OpenMP threads can wait on each other for seconds a step
    overrides = ["framework=torch", "threads=1", "mode=serve", "serve.scenario=single_stream,offline"]
    res = cli.run([*overrides, *TINY], timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    kids = {r.data.params["serve.scenario"]: r for r in cli.runs() if "mlflow.parentRunId" in r.data.tags}
    assert sorted(kids) == ["offline", "single_stream"]
    for run in kids.values():
        m, tags = run.data.metrics, run.data.tags
        assert run.info.status == "FINISHED" and tags["serve.valid"] in ("VALID", "INVALID")
        text = _summary(cli, run)
        assert m["latency_p90_ms"] == pytest.approx(int(PERCENTILE.search(text)[1]) / 1e6, rel=1e-9)
        for name in ("p50", "p95", "p99", "p999", "max"):
            assert m[f"latency_{name}_ms"] > 0
        assert f"Result is : {tags['serve.valid']}" in text
        assert run.data.params["loadgen.min_duration_ms"] == "1000"  # serve.min_duration_s=1 (smoke)
        artifacts = {a.path for a in cli.client().list_artifacts(run.info.run_id, "loadgen")}
        assert artifacts == {"loadgen/mlperf_log_summary.txt", "loadgen/mlperf_log_detail.txt"}
    single, offline = kids["single_stream"], kids["offline"]
    assert single.data.tags["serve.scenario"] == "SingleStream" and single.data.metrics["qps"] > 0
    assert single.data.metrics["serve_batch_mean"] == 1.0  # one sample per query, one query at a time
    assert offline.data.metrics["samples_per_s"] > 0
    assert 1.0 < offline.data.metrics["serve_batch_mean"] <= 4  # coalesced up to serve.max_batch=4
    assert not list(ROOT.glob("mlperf_log_*"))  # LoadGen wrote into the job's folder only


def test_a_recommendation_query_sample_is_one_users_candidate_list(cli):
    overrides = ["framework=torch", "threads=1", "mode=serve", "model=ncf", "+experiment=smoke"]
    res = cli.run([*overrides, "serve.scenario=single_stream"], multirun=False, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    (run,) = cli.runs()
    assert run.data.params["serve.rows_per_sample"] == "101"  # the held-out item and 100 negatives
    text = _summary(cli, run)
    assert run.data.metrics["latency_p90_ms"] == pytest.approx(
        int(PERCENTILE.search(text)[1]) / 1e6, rel=1e-9
    )


def test_an_unknown_scenario_is_one_line_and_no_worker_starts(cli):
    res = cli.run(["framework=torch", "mode=serve", "serve.scenario=burst", *TINY])
    assert res.returncode == 1
    out = res.stdout + res.stderr
    errors = [line for line in out.splitlines() if "config error" in line]
    assert len(errors) == 1 and "serve.scenario='burst': use one of single_stream, multi_stream" in errors[0]
    assert "Traceback" not in out
    jobs = [r for r in cli.runs() if "mlflow.parentRunId" in r.data.tags] if cli.db.exists() else []
    assert jobs == []  # refused before its run was made
