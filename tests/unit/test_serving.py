"""mode=serve's framework-free halves: LoadGen's summary read back as LoadGen wrote it, and the serve
checks that refuse a job in one line before anything runs."""

from __future__ import annotations

import json
import time

import pytest

from dlbench.config import JobConfig, validate
from dlbench.errors import ConfigError
from dlbench.serving.summary import DETAIL_FILE, SUMMARY_FILE, parse_summary

lg = pytest.importorskip("mlperf_loadgen")


def _loadgen_test(out, scenario: str, sleep_s: float, settings=None, issue=None) -> None:
    """A real LoadGen test against a SUT that answers after `sleep_s` (or `issue`, LoadGen's callback,
    answers): the files the parser meets."""

    def sleep_then_answer(samples):
        time.sleep(sleep_s)
        lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0) for q in samples])

    issue = issue or sleep_then_answer
    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(16, 16, lambda s: None, lambda s: None)
    if settings is None:
        settings = lg.TestSettings()
        settings.scenario = getattr(lg.TestScenario, scenario)
        settings.mode = lg.TestMode.PerformanceOnly
        settings.min_duration_ms, settings.min_query_count = 200, 10
        settings.offline_expected_qps = 200
    logs = lg.LogSettings()
    logs.log_output.outdir = str(out)
    logs.log_output.copy_summary_to_stdout = False
    lg.StartTestWithLogSettings(sut, qsl, settings, logs)
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)


def _detail(out) -> dict[str, object]:
    """LoadGen's detail log (a second, independent record of its results): key -> value."""
    rows = [
        json.loads(line.split(":::MLLOG ", 1)[1]) for line in (out / DETAIL_FILE).read_text().splitlines()
    ]
    return {r["key"]: r["value"] for r in rows}


@pytest.mark.parametrize("scenario", ["SingleStream", "Offline"])
def test_the_parsed_figures_are_loadgens_own(tmp_path, scenario):
    _loadgen_test(tmp_path, scenario, 0.002)
    parsed = parse_summary(tmp_path / SUMMARY_FILE)
    detail = _detail(tmp_path)
    m = parsed["metrics"]
    for name, key in (("p50", "50.00"), ("p90", "90.00"), ("p99", "99.00"), ("p999", "99.90")):
        assert m[f"latency_{name}_ms"] == pytest.approx(detail[f"result_{key}_percentile_latency_ns"] / 1e6)
    assert m["latency_max_ms"] == pytest.approx(detail["result_max_latency_ns"] / 1e6)
    assert parsed["valid"] == detail["result_validity"] and parsed["scenario"] == scenario
    rate = "samples_per_s" if scenario == "Offline" else "qps"
    assert m[rate] > 0 and parsed["settings"]["min_duration_ms"] == "200"
    assert m["latency_p50_ms"] >= 2.0  # the SUT slept 2 ms per query: milliseconds, not ns or s


def _multi_stream(min_query_count):
    from dlbench.config import ServeConfig
    from dlbench.serving.loadgen_run import test_settings

    serve = ServeConfig(scenario="multi_stream", min_duration_s=0.2, min_query_count=min_query_count)
    # a lone sample's step 1 ms, a query's 8 samples 2.5 ms: LoadGen must expect 2.5 ms, not 8 x 1 ms
    estimates = {"latency_1_ms": 1.0, "latency_query_ms": 2.5, "samples_per_s_max_batch": 3200.0}
    return test_settings(serve, estimates)


def test_multi_stream_expects_the_querys_own_latency_and_enough_queries_for_a_verdict(tmp_path):
    settings = _multi_stream(None)
    assert settings.multi_stream_expected_latency_ns == 2_500_000
    assert settings.min_query_count == 662  # the fewest LoadGen's early-stopping p99 accepts
    _loadgen_test(tmp_path, "MultiStream", 0.0025, settings)
    parsed = parse_summary(tmp_path / SUMMARY_FILE)
    assert (parsed["valid"], parsed["invalid_because"]) == ("VALID", "")
    assert parsed["settings"]["min_query_count"] == "662"


def test_an_invalid_verdict_says_why_in_loadgens_words(tmp_path):
    _loadgen_test(tmp_path, "MultiStream", 0.0025, _multi_stream(10))  # too few queries for early stopping
    parsed = parse_summary(tmp_path / SUMMARY_FILE)
    assert parsed["valid"] == "INVALID"
    assert parsed["invalid_because"].startswith("Early stopping not satisfied: Only processed ")
    assert "Need to process at least 662 queries" in parsed["invalid_because"]


def test_an_offline_test_faster_than_its_warm_up_still_lasts_its_minimum_duration(tmp_path):
    """The warm-up said 1,000 samples/s; the test answers at about 1,300 (a step of 8 samples in 6 ms):
    LoadGen's one query must still hold enough samples for min_duration, else the test is INVALID."""
    from dlbench.config import ServeConfig
    from dlbench.serving.loadgen_run import test_settings

    serve = ServeConfig(scenario="offline", min_duration_s=0.3)
    settings = test_settings(
        serve, {"latency_1_ms": 1.0, "latency_query_ms": 1.0, "samples_per_s_max_batch": 1000.0}
    )

    def issue(samples):  # Offline: one query of every sample, answered 8 at a time
        for i in range(0, len(samples), 8):
            time.sleep(0.006)
            lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0) for q in samples[i : i + 8]])

    _loadgen_test(tmp_path, "Offline", 0.0, settings, issue)
    parsed = parse_summary(tmp_path / SUMMARY_FILE)
    assert (parsed["valid"], parsed["invalid_because"]) == ("VALID", "")
    assert parsed["metrics"]["samples_per_s"] > 1000.0  # it did run faster than the warm-up said


def test_a_querys_latency_is_its_steps_at_the_allowed_sizes():
    from dlbench.serving.loadgen_run import query_latency

    step = {1: 1.0, 2: 1.5, 4: 2.0, 8: 3.0}.__getitem__  # seconds per step at each allowed size
    sizes = [1, 2, 4, 8]
    assert query_latency(1, sizes, step) == 1.0
    assert query_latency(3, sizes, step) == 2.0  # padded to 4
    assert query_latency(8, sizes, step) == 3.0
    assert query_latency(20, sizes, step) == 3.0 + 3.0 + 2.0  # two full steps of 8, then 4


@pytest.mark.parametrize(
    ("serve", "key"),
    [
        ({"scenario": "burst"}, "serve.scenario='burst'"),
        ({"scenario": "server", "latency_bound_ms": 0}, "serve.latency_bound_ms=0"),
        ({"min_duration_s": 10, "max_duration_s": 5}, "serve.max_duration_s=5"),
        ({"min_query_count": 10, "max_query_count": 2}, "serve.max_query_count=2"),
        ({"target_qps": -1}, "serve.target_qps=-1"),
        ({"max_batch": 0}, "serve.max_batch=0"),
        ({"max_batch": 8, "batch_sizes": [1, 4]}, "serve.batch_sizes=[1, 4]"),
        ({"max_batch": 8, "batch_sizes": [0, 8]}, "serve.batch_sizes=[0, 8]"),
        ({"max_batch": 8, "batch_sizes": []}, "serve.batch_sizes=[]"),
    ],
)
def test_a_serve_job_that_cannot_run_is_one_line(serve, key):
    job = JobConfig.from_dict({"mode": "serve", "serve": serve})
    with pytest.raises(ConfigError) as err:
        validate(job)
    assert str(err.value).startswith(key) and "\n" not in str(err.value)


def test_a_bad_batch_size_list_names_the_fix():
    job = JobConfig.from_dict({"mode": "serve", "serve": {"max_batch": 8, "batch_sizes": [2, 16]}})
    with pytest.raises(ConfigError) as err:
        validate(job)
    assert "largest is serve.max_batch=8" in str(err.value)


@pytest.mark.parametrize(
    ("max_batch", "sizes", "allowed"),
    [(64, None, [1, 2, 4, 8, 16, 32, 64]), (6, None, [1, 2, 4, 6]), (1, None, [1]), (8, [8, 2, 2], [2, 8])],
)
def test_the_allowed_batch_sizes(max_batch, sizes, allowed):
    from dlbench.serving.settings import allowed_batch_sizes

    job = JobConfig.from_dict({"mode": "serve", "serve": {"max_batch": max_batch, "batch_sizes": sizes}})
    validate(job)
    assert allowed_batch_sizes(job.serve) == allowed


def test_a_batch_is_padded_to_the_smallest_allowed_size_with_its_last_sample():
    from dlbench.serving.loadgen_run import padded

    assert padded([7, 3, 5], [1, 2, 4, 8]) == [7, 3, 5, 5]
    assert padded([7, 3], [1, 2, 4, 8]) == [7, 3]  # an allowed size: no padding
    assert padded([9], [4, 8]) == [9, 9, 9, 9]


def test_a_dataset_not_served_yet_is_one_line():
    change = {"dataset": {"name": "imagenet", "path": "/data"}}
    with pytest.raises(ConfigError) as err:
        validate(JobConfig.from_dict({"mode": "serve", **change}))
    assert "use dataset=synthetic, not imagenet" in str(err.value) and "\n" not in str(err.value)


def test_a_batch_of_sentences_is_padded_to_its_longest_rounded_to_the_bucket():
    from dlbench.serving.loadgen_run import SentenceLibrary
    from dlbench.workloads.translation.token_batches import BUCKET

    model = {"task": "translation", "name": "transformer", "lengths": "lognormal", "max_len": 64}
    library = SentenceLibrary(JobConfig.from_dict({"mode": "serve", "model": model}), 64)
    widths = library.widths
    short, long = min(range(64), key=widths.__getitem__), max(range(64), key=widths.__getitem__)
    assert widths[short] < widths[long]
    for indices in ([short], [short, long]):
        src, tgt_in = (library.batch(indices).inputs[k] for k in ("src", "tgt_in"))
        longest = max(max(len(s), len(t)) + 1 for s, t in (library.pairs[i] for i in indices))
        assert src.shape == tgt_in.shape == (len(indices), -(-longest // BUCKET) * BUCKET)
    shapes = {library.batch(b).inputs["src"].shape for b in library.warmup_indices(2)}
    assert shapes == {(2, w) for w in set(widths)}  # the warm-up meets every padded length


def _server_trial(service_s: float, bound_ms: float):
    """A real LoadGen Server test of a one-thread server that takes `service_s` per query, so its p99
    grows with the offered rate and passes `bound_ms` somewhere below 1 / service_s."""
    import queue
    import threading

    def trial(qps: float, folder) -> None:
        pending: queue.SimpleQueue = queue.SimpleQueue()
        done = threading.Event()

        def serve() -> None:
            while not done.is_set():
                try:
                    q = pending.get(timeout=0.005)
                except queue.Empty:
                    continue
                time.sleep(service_s)
                lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0)])

        worker = threading.Thread(target=serve, daemon=True)
        worker.start()
        sut = lg.ConstructSUT(lambda qs: [pending.put(q) for q in qs], lambda: None)
        qsl = lg.ConstructQSL(16, 16, lambda s: None, lambda s: None)
        s = lg.TestSettings()
        s.scenario, s.mode = lg.TestScenario.Server, lg.TestMode.PerformanceOnly
        s.server_target_qps, s.server_target_latency_ns = qps, int(bound_ms * 1e6)
        s.min_duration_ms, s.max_duration_ms, s.min_query_count = 700, 1400, 1
        logs = lg.LogSettings()
        logs.log_output.outdir = str(folder)
        logs.log_output.copy_summary_to_stdout = False
        lg.StartTestWithLogSettings(sut, qsl, s, logs)
        done.set()
        worker.join()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)

    return trial


def test_the_server_search_brackets_the_rate_where_loadgen_says_the_bound_breaks(tmp_path):
    from dlbench.serving.search import find_peak_qps

    peak, trials = find_peak_qps(_server_trial(0.01, 40.0), 20.0, 25.0, tmp_path)
    assert peak > 0 and any(t["met"] for t in trials) and any(not t["met"] for t in trials)
    assert peak == max(t["qps"] for t in trials if t["met"])  # the highest rate LoadGen passed
    assert peak < 100  # a 10 ms server cannot keep p99 under 40 ms at its saturation rate
    assert (tmp_path / "trial00" / "mlperf_log_summary.txt").exists()


def test_serve_settings_change_the_config_hash_of_serve_jobs_only():
    from dlbench.tracking.resume import config_hash

    def digest(mode: str, scenario: str) -> str:
        return config_hash(JobConfig.from_dict({"mode": mode, "serve": {"scenario": scenario}}).to_dict())

    assert digest("train", "single_stream") == digest("train", "offline")  # resume finds earlier runs
    assert digest("serve", "single_stream") != digest("serve", "offline")
