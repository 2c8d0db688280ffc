"""mode=serve through the real CLI: LoadGen's queries answered by a framework's inference step, its own
summary recorded, its figures logged exactly as it printed them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY
from tests.e2e.test_cli import missing_columns, sweep_parent

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
        assert (tags["serve.valid"] == "INVALID") == bool(tags.get("serve.invalid_because"))  # LoadGen's why
        assert run.data.params["loadgen.min_duration_ms"] == "1000"  # serve.min_duration_s=1 (smoke)
        artifacts = {a.path for a in cli.client().list_artifacts(run.info.run_id, "loadgen")}
        assert artifacts == {"loadgen/mlperf_log_summary.txt", "loadgen/mlperf_log_detail.txt"}
        params = run.data.params  # serve.batch_sizes=null, max_batch=4: the steps ran at 1, 2 and 4 only
        assert params["serve.batch_sizes"] == "[1, 2, 4]" and params["serve.warmup_sizes"] == "1,2,4"
        assert set(params["serve.step_sizes"].split(",")) <= {"1", "2", "4"}
    single, offline = kids["single_stream"], kids["offline"]
    assert single.data.tags["serve.scenario"] == "SingleStream" and single.data.metrics["qps"] > 0
    assert single.data.metrics["serve_batch_mean"] == 1.0  # one sample per query, one query at a time
    assert single.data.metrics["serve_padded_fraction"] == 0.0  # 1 is an allowed size
    assert offline.data.metrics["samples_per_s"] > 0
    assert 1.0 < offline.data.metrics["serve_batch_mean"] <= 4  # coalesced up to serve.max_batch=4
    assert not list(ROOT.glob("mlperf_log_*"))  # LoadGen wrote into the job's folder only
    # the sweep's UI view shows LoadGen's columns (a serving job logs no throughput), lowest p90 first
    parent = sweep_parent(cli.runs())
    tags = cli.client().get_experiment(parent.info.experiment_id).tags
    view = json.loads(tags[f"mlflow.sharedViewState.{parent.info.run_id}"])
    assert (view["orderByKey"], view["orderByAsc"]) == ("metrics.`latency_p90_ms`", True)
    assert "metrics.`throughput`" not in view["selectedColumns"]
    assert {"metrics.`latency_p99_ms`", "tags.`serve.scenario`"} <= set(view["selectedColumns"])
    assert all(missing_columns(r, view["selectedColumns"][:2]) == [] for r in kids.values())


def _padded_single_stream(cli, framework: str, sizes: str) -> dict:
    """A SingleStream run whose smallest allowed batch size is above 1: every query is padded."""
    overrides = [f"framework={framework}", "threads=1", "mode=serve", "serve.scenario=single_stream"]
    res = cli.run([*overrides, f"serve.batch_sizes={sizes}", *TINY], multirun=False, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    (run,) = cli.runs()
    assert run.info.status == "FINISHED" and run.data.tags["serve.valid"] in ("VALID", "INVALID")
    assert f"Result is : {run.data.tags['serve.valid']}" in _summary(cli, run)  # LoadGen judged it
    return run.data


def test_a_step_runs_padded_to_an_allowed_batch_size_and_warms_up_those_only(cli):
    data = _padded_single_stream(cli, "torch", "[2,4]")
    assert data.params["serve.batch_sizes"] == "[2, 4]" and data.params["serve.warmup_sizes"] == "2,4"
    assert data.params["serve.step_sizes"] == "2"  # one query's sample, padded to 2, never run at 1
    assert data.metrics["serve_padded_fraction"] == 1.0 and data.metrics["serve_batch_mean"] == 1.0


def test_jax_serves_through_its_own_interpreter(cli):
    from dlbench.backends.interpreter import worker_python
    from dlbench.config import JaxConfig
    from dlbench.errors import ConfigError

    try:
        worker_python(JaxConfig())
    except ConfigError as exc:
        pytest.skip(str(exc))
    # the warm-up removes the layer probe after the first traced step, as for the other frameworks
    data = _padded_single_stream(cli, "jax", "[2,4]")
    assert data.params["serve.warmup_sizes"] == "2,4" and data.params["serve.step_sizes"] == "2"
    assert data.metrics["latency_p90_ms"] > 0


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


@pytest.mark.parametrize(
    ("framework", "postprocess"), [("torch", "false"), ("torch", "true"), ("mxnet", "true")]
)
def test_a_detection_query_sample_is_one_image(cli, framework, postprocess):
    # SSD300's smallest config (+experiment=smoke: 32x32 images); true: box decoding and NMS in the step,
    # whose integer labels MXNet's predict reads back without amp_cast (MKLDNN refuses integer arrays)
    overrides = [f"framework={framework}", "threads=1", "mode=serve", "model=ssd300", "+experiment=smoke"]
    overrides += [f"model.postprocess={postprocess}", "serve.scenario=offline"]
    res = cli.run(overrides, multirun=False, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    (run,) = cli.runs()
    params = run.data.params
    assert params["serve.rows_per_sample"] == "1" and params["model.postprocess"].lower() == postprocess
    assert run.data.tags["serve.valid"] in ("VALID", "INVALID") and run.data.metrics["samples_per_s"] > 0
    assert params["serve.warmup_sizes"] == "1,2,4"
    assert f"Result is : {run.data.tags['serve.valid']}" in _summary(cli, run)


def test_a_translation_query_sample_is_one_sentence_decoded_greedily(cli):
    # lognormal lengths up to 32 tokens: batches padded to 8, 16, 24 or 32, each met in the warm-up
    overrides = ["framework=torch", "threads=1", "mode=serve", "model=transformer", "+experiment=smoke"]
    overrides += ["model.lengths=lognormal", "model.max_len=32", "serve.scenario=offline"]
    res = cli.run(overrides, multirun=False, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    (run,) = cli.runs()
    params, tags = run.data.params, run.data.tags
    assert params["serve.rows_per_sample"] == "1" and params["serve.warmup_sizes"] == "1,2,4"
    assert tags["serve.valid"] in ("VALID", "INVALID") and run.data.metrics["samples_per_s"] > 0
    assert f"Result is : {tags['serve.valid']}" in _summary(cli, run)


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("serve.scenario=burst", "serve.scenario='burst': use one of single_stream, multi_stream"),
        ("serve.batch_sizes=[1,2]", "serve.batch_sizes=[1, 2]: list sizes of 1 or more whose largest is"),
    ],
)
def test_a_serve_config_error_is_one_line_and_no_worker_starts(cli, override, words):
    res = cli.run(["framework=torch", "mode=serve", override, *TINY])
    assert res.returncode == 1
    out = res.stdout + res.stderr
    errors = [line for line in out.splitlines() if "config error" in line]
    assert len(errors) == 1 and words in errors[0]
    assert "Traceback" not in out
    jobs = [r for r in cli.runs() if "mlflow.parentRunId" in r.data.tags] if cli.db.exists() else []
    assert jobs == []  # refused before its run was made
