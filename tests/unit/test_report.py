"""The report against a real sqlite MLflow store filled the way jobs fill it (RunLogger, flattened job
config as params), the CLI in a subprocess, the sweep hook through real Hydra composition, and the
experiment presets."""

from __future__ import annotations

import csv
import functools
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from dlbench.config import JobConfig, register_configs, validate
from dlbench.report import ReportInputError, build_report, describe_store, open_client
from dlbench.report.analysis import analyze, faster_text, interval, separated
from dlbench.report.load import job_row, select
from dlbench.report.render import DASH, DIVERGED, FEW, FLAG, failed_table, findings_block, result_table
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import open_store
from dlbench.tracking.sweep import PARENT_ENV, STATE, SweepTally, SweepTracking, ensure_parent, finish_sweep

ROOT = Path(__file__).resolve().parents[2]
REPORT_CLI = ROOT / "src" / "report.py"
GPU = {"gpu_util_mean": 90.0, "gpu_mem_used_mib_max": 10_000.0, "framework_mem_mib_max": 8_000.0}
GPU |= {"energy_j_per_sample": 1.5, "power_w_mean": 250.0}


def log_job(
    client: MlflowClient,
    experiment_id: str,
    parent_id: str | None,
    what: str,
    tput: tuple[float, float, float] | None,
    status: str = "FINISHED",
    metrics: dict[str, float] | None = None,
    tags: dict[str, str] | None = None,
    series: list[dict[str, float]] | None = None,
    repeats: int = 1,
    knobs: dict | None = None,
    params: dict[str, str] | None = None,
    older: tuple[str, ...] = (),
) -> str:
    """One job run as the orchestrator writes it; what = "framework model precision mode",
    tput = (p05, median, p95); knobs = the framework's own keys (e.g. {"compile": True}); params: logged
    over the config's (e.g. {"serve.scenario": "server"} or LoadGen's "loadgen.*"); older: config keys left
    out, as a version from before they existed logged the run."""
    framework, model, precision, mode = what.split()
    job = JobConfig.from_dict(
        {
            "framework": {"name": framework, **(knobs or {})},
            "model": {"name": model},
            "precision": {"name": precision},
            "mode": mode,
        }
    )
    job.schedule.repeats = repeats
    run = RunLogger.create(
        client, experiment_id, f"{framework}-{model}-{precision}-{mode}", parent_id, {"dlbench.kind": "job"}
    )
    logged = {k: v for k, v in flatten(job.to_dict()).items() if k not in older}
    run.params(logged | {"batch_size": job.batch_size} | (params or {}))
    values = {"warmup_s": 4.0, "cpu_util_mean": 30.0, "startup_s": 2.0, "host_rss_mib_max": 900.0}
    if tput is not None:
        values |= {"throughput_p05": tput[0], "throughput": tput[1], "throughput_p95": tput[2]}
    run.metrics(values | (metrics or {}))
    run.tags(
        {"dlbench.status": status, "device": "cuda:0" if metrics and "gpu_util_mean" in metrics else "cpu"}
    )
    if tags:
        run.tags(tags)
    if series:
        run.series(series)
    run.finish(status)
    return run.run_id


def make_sweep(client: MlflowClient, experiment_id: str, overrides: str) -> RunLogger:
    return RunLogger.create(
        client,
        experiment_id,
        f"sweep {overrides}",
        tags={"dlbench.kind": "sweep", "dlbench.overrides": overrides},
    )


def gpu_series(n: int = 20, level: float = 90.0) -> list[dict[str, float]]:
    t0 = time.time()
    return [
        {"t": t0 + 0.1 * i, "gpu0/util": level if i > 3 else 0.0, "host/cpu_util": 25.0} for i in range(n)
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two sweeps in one experiment; the first is the one most tests read."""
    db = tmp_path_factory.mktemp("store") / "mlflow.db"
    uri = f"sqlite:///{db}"
    client, eid = open_store(uri, "dlbench")
    s1 = make_sweep(client, eid, "framework=tf,torch,mxnet precision=fp32,amp")
    job = functools.partial(log_job, client, eid, s1.run_id)
    cpu_util = [{"t": time.time() + 0.1 * i, "host/cpu_util": 50.0 + i} for i in range(15)]
    oom = {"failure": "oom", "failure.message": "MXNetError: out of memory\nTraceback ..."}
    ids = {
        # resnet50 train: fp32 intervals disjoint (torch 25% faster); amp intervals overlap.
        "torch-fp32": job("torch resnet50 fp32 train", (95, 100, 105), metrics=GPU, series=gpu_series()),
        "tf-fp32": job("tf resnet50 fp32 train", (76, 80, 84), metrics=GPU, series=gpu_series(level=70)),
        "torch-amp": job("torch resnet50 amp train", (240, 250, 260), metrics=GPU),
        "tf-amp": job("tf resnet50 amp train", (200, 245, 270), metrics=GPU),
        # resnet50 infer: p5-p95 disjoint, but torch was repeated with a 7% spread, which closes the gap.
        "torch-infer": job(
            "torch resnet50 fp32 infer",
            (290, 300, 310),
            metrics=GPU | {"throughput_spread": 0.07},
            tags={"dlbench.spread_flag": "high"},
            repeats=3,
        ),
        "tf-infer": job("tf resnet50 fp32 infer", (315, 320, 325), metrics=GPU),
        # A CPU-only run: no GPU metrics, host CPU utilization only.
        "cpu": job("torch resnet_cifar fp32 train", (9, 10, 11), series=cpu_util),
        "oom": job("mxnet resnet50 fp32 train", None, status="FAILED", tags=oom),
    }
    s1.finish("FAILED")
    time.sleep(0.01)
    s2 = make_sweep(client, eid, "model=resnet50 framework=torch")
    ids["newer"] = log_job(client, eid, s2.run_id, "torch resnet50 fp32 train", (108, 110, 112), metrics=GPU)
    s2.finish("FINISHED")
    _, empty_eid = open_store(uri, "all-failed")
    s3 = make_sweep(client, empty_eid, "framework=mxnet")
    log_job(
        client,
        empty_eid,
        s3.run_id,
        "mxnet vgg16 fp32 train",
        None,
        status="FAILED",
        tags={"failure": "crash"},
    )
    s3.finish("FAILED")
    p = s1.run_id
    return {
        "uri": uri,
        "client": client,
        "eid": eid,
        "sweep": p,
        "sweep2": s2.run_id,
        "empty": s3.run_id,
        "ids": ids,
    }


@pytest.fixture(scope="module")
def sweep_analysis(store: dict):
    return analyze(select(store["client"], store["uri"], run_id=store["sweep"]).jobs)


def row(analysis, model: str, mode: str, framework: str, precision: str):
    df = analysis.frame()
    hit = df[
        (df.model == model) & (df["mode"] == mode) & (df.framework == framework) & (df.precision == precision)
    ]
    assert len(hit) == 1, df
    return hit.iloc[0]


def test_table_values_and_speedups(sweep_analysis):
    r = row(sweep_analysis, "resnet50", "train", "torch", "amp")
    assert r.throughput == 250 and (r.p05, r.p95) == (240, 260)
    assert r.speedup_vs_fp32 == pytest.approx(2.5)
    assert r.rel_fastest == pytest.approx(1.0)
    tf = row(sweep_analysis, "resnet50", "train", "tf", "fp32")
    assert tf.speedup_vs_fp32 == pytest.approx(1.0)
    assert tf.rel_fastest == pytest.approx(0.8)  # against torch fp32 (100), not against an amp run
    assert row(sweep_analysis, "resnet50", "train", "tf", "amp").rel_fastest == pytest.approx(245 / 250)
    assert (tf.gpu_util, tf.gpu_mem_mib, tf.framework_mem_mib, tf.energy_j_per_sample) == (
        90,
        10_000,
        8_000,
        1.5,
    )
    assert [g.title for g in sweep_analysis.groups] == [
        "resnet50 infer",
        "resnet50 train",
        "resnet_cifar train",
    ]
    # frameworks in the article's order, fp32 before amp
    train = next(g for g in sweep_analysis.groups if g.title == "resnet50 train")
    assert [(e.job.framework, e.job.precision) for e in train.entries] == [
        ("tf", "fp32"),
        ("tf", "amp"),
        ("torch", "fp32"),
        ("torch", "amp"),
    ]


def test_missing_metrics_show_a_dash(sweep_analysis):
    cpu = next(g for g in sweep_analysis.groups if g.model == "resnet_cifar")
    table = result_table(cpu, show_spread=False)
    cells = dict(zip(table.headers, table.rows[0], strict=True))
    assert cells["GPU util"] == cells["GPU mem peak (MiB)"] == cells["energy (J/sample)"] == DASH
    assert cells["CPU util"] == "30%" and cells["throughput (samples/s)"] == "10.0"
    assert cells["× fp32"] == "1.00×"


def test_sentence_only_when_intervals_do_not_overlap(sweep_analysis):
    texts = [f.text for f in sweep_analysis.findings]
    assert "on resnet50 train fp32, torch is 25% faster than tf." in texts
    # amp: torch 240-260 and tf 200-270 overlap -> no claim either way, only a 'no clear winner' note
    assert not any("resnet50 train amp" in t and "faster" in t for t in texts)
    assert "on resnet50 train amp, torch and tf are within the measured spread (no clear winner)." in texts
    assert "mixed precision (amp) speeds up torch on resnet50 train by 2.50×." in texts
    assert "mixed precision (amp) speeds up tf on resnet50 train by 3.06×." in texts
    claims = [f for f in sweep_analysis.findings if f.kind != "tie"]
    assert len(claims) == 3, texts


def test_repeat_spread_widens_the_interval_and_is_flagged(store, sweep_analysis):
    client = store["client"]
    torch_run = job_row(client.get_run(store["ids"]["torch-infer"]))
    tf_run = job_row(client.get_run(store["ids"]["tf-infer"]))
    assert interval(torch_run) == pytest.approx((279.0, 321.0))  # 300 x (1 -/+ 0.07) beats p5-p95
    assert not separated(tf_run, torch_run)  # 315 > 310 (p95) but not > 321
    texts = [f.text for f in sweep_analysis.findings]
    assert not any("resnet50 infer" in t and "faster" in t for t in texts)
    infer = next(g for g in sweep_analysis.groups if g.title == "resnet50 infer")
    table = result_table(infer, show_spread=sweep_analysis.has_spread)
    spread = table.headers.index("repeat spread")
    assert [r[spread] for r in table.rows] == [DASH, f"7.0% (3×) {FLAG}"]  # tf first, then torch


def test_a_diverged_job_is_marked_and_makes_no_claim(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "precision=fp32,amp")
    log_job(client, eid, sweep.run_id, "torch resnet50 fp32 train", (95, 100, 105))
    nan = {"dlbench.loss_flag": "non-finite"}  # what the orchestrator tags when the loss went NaN
    log_job(client, eid, sweep.run_id, "torch resnet50 amp train", (290, 300, 310), tags=nan)
    sweep.finish("FINISHED")
    analysis = analyze(select(client, uri, run_id=sweep.run_id).jobs)
    assert not [f for f in analysis.findings if "amp" in f.text]  # 3x "faster", but the training diverged
    [group] = analysis.groups
    table = result_table(group, show_spread=False)
    cells = {r[2]: r[3] for r in table.rows}
    assert cells == {"fp32": "100", "amp": f"300 {FLAG} {DIVERGED}"}
    assert any("diverged" in p for p in findings_block(analysis).paragraphs)
    assert list(analysis.frame().diverged) == [False, True]


def test_means_over_too_few_telemetry_samples_are_marked(tmp_path):
    """A timed phase of a fraction of a second holds one or two 10 Hz samples: its utilization and energy
    describe the warm-up more than the phase, so the table marks them and the findings say why."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "precision=fp32,amp")
    job = functools.partial(log_job, client, eid, sweep.run_id)
    job("torch resnet50 fp32 train", (95, 100, 105), metrics=GPU | {"telemetry_samples": 40})
    job("torch resnet50 amp train", (190, 200, 210), metrics=GPU | {"telemetry_samples": 2})
    sweep.finish("FINISHED")
    analysis = analyze(select(client, uri, run_id=sweep.run_id).jobs)
    table = result_table(analysis.groups[0], show_spread=False)
    col = {h: i for i, h in enumerate(table.headers)}
    rows = {r[2]: r for r in table.rows}
    util, energy, cpu = col["GPU util"], col["energy (J/sample)"], col["CPU util"]
    assert (rows["fp32"][util], rows["fp32"][energy], rows["fp32"][cpu]) == ("90%", "1.50", "30%")
    assert (rows["amp"][util], rows["amp"][energy], rows["amp"][cpu]) == (
        f"90% {FEW}",
        f"1.50 {FEW}",
        f"30% {FEW}",
    )
    assert rows["amp"][col["GPU mem peak (MiB)"]] == "10,000"  # a peak needs no mean: not marked
    assert any(p.startswith(f"{FEW} marks") for p in findings_block(analysis).paragraphs)
    assert list(analysis.frame().telemetry_samples) == [40, 2]


def test_rows_show_the_verified_dtype_and_the_task_unit(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "precision=fp32,amp")
    verified = {"fp32": "float32", "amp": "bfloat16"}
    for precision, tput in (("fp32", (95, 100, 105)), ("amp", (190, 200, 210))):
        tags = {"precision.compute_dtype": verified[precision]}  # read from real layer outputs
        run_id = log_job(client, eid, sweep.run_id, f"torch translation {precision} train", tput, tags=tags)
        client.log_param(run_id, "throughput_unit", "target tokens")  # as the orchestrator logs it
    sweep.finish("FINISHED")
    [group] = analyze(select(client, uri, run_id=sweep.run_id).jobs).groups
    table = result_table(group, show_spread=False)
    assert "throughput (target tokens/s)" in table.headers and "energy (J/target token)" in table.headers
    assert [r[2] for r in table.rows] == ["fp32 (float32)", "amp (bfloat16)"]


def test_compiled_runs_are_compared_only_with_compiled_runs(tmp_path):
    # framework.compile is torch's alone: tf's graph run (no XLA) belongs with eager torch, compiled torch
    # has a table of its own, and the findings say in one sentence that the runs mix execution modes
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "framework=torch,tf")
    log_job(client, eid, sweep.run_id, "torch resnet50 fp32 train", (95, 100, 105))
    log_job(client, eid, sweep.run_id, "torch resnet50 fp32 train", (145, 150, 155), knobs={"compile": True})
    log_job(client, eid, sweep.run_id, "tf resnet50 fp32 train", (76, 80, 84))
    sweep.finish("FINISHED")
    groups = analyze(select(client, uri, run_id=sweep.run_id).jobs).groups
    tables = {g.title: sorted((e.job.framework, e.job.execution) for e in g.entries) for g in groups}
    assert tables == {
        "resnet50 train, eager/graph": [("tf", "graph"), ("torch", "eager")],
        "resnet50 train, compiled": [("torch", "torch.compile(default)")],
    }
    findings = analyze(select(client, uri, run_id=sweep.run_id).jobs).findings
    assert (
        findings[0].kind == "mode"
        and "mix execution modes (tf: graph; torch: eager, torch.compile" in findings[0].text
    )
    # the compiled torch run (150) is never said to beat tf's graph run (80)
    assert not [f for f in findings if "tf" in f.text and f.kind == "framework" and "150" in f.text]
    assert [f.text for f in findings if f.kind == "framework"] == [
        "on resnet50 train fp32 (eager/graph runs), torch is 25% faster than tf."
    ]


@pytest.mark.parametrize(
    ("ratio", "text"),
    [
        (1.004, "0.4% faster"),
        (1.0094, "0.9% faster"),
        (1.12, "12% faster"),
        (1.996, "100% faster"),
        (2.3, "2.3× faster"),
    ],
)
def test_a_small_lead_is_never_written_as_zero_percent(ratio, text):
    assert faster_text(ratio) == text


def test_jax_runs_of_two_dropout_generators_are_two_configurations(tmp_path):
    # framework.prng=rbg,threefry2x32: both runs stay in the report, the one off the usual generator labelled
    # and in a table of its own; neither is hidden as a repeat of the other
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "framework=torch,jax framework.prng=rbg,threefry2x32")
    log_job(
        client, eid, sweep.run_id, "torch transformer bf16 train", (95, 100, 105), knobs={"compile": True}
    )
    log_job(client, eid, sweep.run_id, "jax transformer bf16 train", (101, 104, 107), knobs={"prng": "rbg"})
    log_job(
        client, eid, sweep.run_id, "jax transformer bf16 train", (96, 99, 102), knobs={"prng": "threefry2x32"}
    )
    sweep.finish("FINISHED")
    analysis = analyze(select(client, uri, run_id=sweep.run_id).jobs)
    assert analysis.hidden == 0
    tables = {
        g.variant: sorted((e.job.framework, e.job.metric("throughput")) for e in g.entries)
        for g in analysis.groups
    }
    assert tables == {"": [("jax", 104), ("torch", 100)], "framework.prng=threefry2x32": [("jax", 99)]}


def test_a_jax_run_from_before_the_generator_option_is_an_rbg_run(tmp_path):
    # a store holding a JAX run logged without framework.prng (rbg was the only generator then) and a newer
    # threefry run: two configurations, the old run not hidden as a repeat
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "framework=jax")
    old = ("framework.prng",)
    log_job(client, eid, sweep.run_id, "jax transformer bf16 train", (101, 104, 107), older=old)
    log_job(client, eid, sweep.run_id, "jax transformer bf16 infer", (50, 51, 52), older=old)
    log_job(
        client, eid, sweep.run_id, "jax transformer bf16 train", (96, 99, 102), knobs={"prng": "threefry2x32"}
    )
    log_job(client, eid, sweep.run_id, "jax transformer bf16 infer", (49, 50, 51), knobs={"prng": "rbg"})
    sweep.finish("FINISHED")
    analysis = analyze(select(client, uri, run_id=sweep.run_id).jobs)
    assert analysis.hidden == 1  # the infer runs are one configuration (rbg both): the older is a repeat
    tables = {
        (g.mode, g.variant): sorted(e.job.metric("throughput") for e in g.entries) for g in analysis.groups
    }
    assert tables == {
        ("train", "framework.prng=rbg"): [104],
        ("train", "framework.prng=threefry2x32"): [99],
        ("infer", ""): [50],
    }


def test_failed_runs_listed_with_their_failure_tag(sweep_analysis):
    [failed] = sweep_analysis.failed
    assert (failed.framework, failed.status, failed.failure) == ("mxnet", "FAILED", "oom")
    assert failed.failure_message == "MXNetError: out of memory"


def test_a_failed_run_names_its_execution_and_one_run_again_is_not_listed(tmp_path):
    """The failed-runs table tells a graph failure from an XLA one of the same framework, model and precision;
    a failure whose configuration was run again and finished is history, not listed."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "framework=tf,torch")
    crash = {"failure": "crash", "failure.message": "worker died"}
    log_job(client, eid, sweep.run_id, "tf ncf amp train", None, "FAILED", tags=crash)
    xla = log_job(
        client, eid, sweep.run_id, "tf ncf amp infer", None, "FAILED", tags=crash, knobs={"xla": True}
    )
    time.sleep(0.01)  # the reruns start later
    log_job(client, eid, sweep.run_id, "tf ncf amp train", (9, 10, 11))
    log_job(client, eid, sweep.run_id, "tf ncf amp infer", (19, 20, 21))  # graph: not the failed XLA cell
    sweep.finish("FINISHED")
    analysis = analyze(select(client, uri, run_id=sweep.run_id).jobs)
    table = failed_table(analysis.failed)
    assert table.headers[1:3] == ["framework", "execution"]
    assert [(r[-1], r[2], r[5]) for r in table.rows] == [(xla, "xla", "infer")]
    assert analysis.hidden == 1


def test_experiment_keeps_the_newest_run_of_each_configuration(store):
    sel = select(store["client"], store["uri"], experiment="dlbench")
    a = analyze(sel.jobs)
    assert a.hidden == 1
    assert row(a, "resnet50", "train", "torch", "fp32").throughput == 110
    assert sel.parent is None


def test_default_is_the_latest_sweep_of_dlbench(store):
    sel = select(store["client"], store["uri"])
    assert sel.parent.info.run_id == store["sweep2"]
    assert [j.run_id for j in sel.jobs] == [store["ids"]["newer"]]


def test_input_errors_are_one_line(store, tmp_path):
    client, uri = store["client"], store["uri"]
    for kwargs, expected in (
        ({"experiment": "nope"}, "no experiment 'nope'"),
        ({"run_id": "0" * 32}, "no run '000"),
    ):
        with pytest.raises(ReportInputError, match=expected) as err:
            build_report(client, uri, tmp_path / "x", **kwargs)
        assert "\n" not in str(err.value) and "--list" in str(err.value)
    with pytest.raises(ReportInputError, match="no finished runs"):
        build_report(client, uri, tmp_path / "x", run_id=store["empty"])
    with pytest.raises(ReportInputError, match="no MLflow database"):
        open_client(f"sqlite:///{tmp_path / 'absent.db'}")
    assert not (tmp_path / "absent.db").exists()  # and none was created
    listing = "\n".join(describe_store(client, uri))
    assert store["sweep"] in listing and "'all-failed'" in listing


def test_report_files(store, tmp_path):
    report = build_report(store["client"], store["uri"], tmp_path / "out", run_id=store["sweep"])
    names = sorted(p.name for p in report.files)
    assert "report.md" in names and "report.html" in names and "speedup.png" in names
    with open(report.csv, newline="") as f:  # every table row, with its framework and execution mode
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:6] == ["model", "mode", "variant", "framework", "execution", "precision"]
    assert {(r["model"], r["mode"], r["framework"], r["execution"], r["precision"]) for r in rows} >= {
        ("resnet50", "train", "tf", "graph", "amp"),
        ("resnet50", "train", "torch", "eager", "fp32"),
    }
    assert len(rows) == len(report.analysis.finished)
    for slug in ("resnet50-train", "resnet50-infer", "resnet-cifar-train"):
        assert f"throughput-{slug}.png" in names and f"memory-{slug}.png" in names
    # utilization only where runs logged a series (the infer runs of this store did not)
    assert [n for n in names if n.startswith("utilization")] == [
        "utilization-resnet-cifar-train.png",
        "utilization-resnet50-train.png",
    ]
    for png in report.images:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    md = report.markdown.read_text()
    # the repeat-spread column is there because one run of the sweep was repeated
    assert (
        "| torch | eager | amp | 250 | 240–260 | – | 2.50× | 1.00× | 90% | 10,000 | 8,000 | 30% | 1.50 | 4.00 |"
        in md
    )
    assert "![throughput: resnet50 train](throughput-resnet50-train.png)" in md
    # the allocator's peak spans the warm-up, NVML's the timed phase: the note says which is which
    assert "Framework mem peak: the allocator's peak over the whole job, warm-up included" in md
    assert "| mxnet-resnet50-fp32-train | mxnet | hybridized | resnet50 | fp32 | train | FAILED | oom |" in md
    page = report.html.read_text()
    assert page.count("data:image/png;base64,") == len(report.images)
    assert 'src="http' not in page and "<link" not in page  # self-contained
    assert '<table id="table-resnet50-train" class="dlbench-table results">' in page
    assert '<table id="failed-runs"' in page


def test_utilization_falls_back_to_host_cpu(store, tmp_path):
    from dlbench.report.load import load_history

    run = store["client"].get_run(store["ids"]["cpu"])
    h = load_history(store["client"], run.info.run_id, run.info.start_time)
    assert h.key == "host/cpu_util" and len(h.values) == 15 and h.values[:2] == [50.0, 51.0]
    h = load_history(store["client"], store["ids"]["torch-fp32"], 0)
    assert h.key == "gpu0/util" and h.seconds[0] == 0.0 and len(h.values) == 20


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPORT_CLI), *args], cwd=cwd, capture_output=True, text=True, timeout=240
    )


def test_cli_writes_the_report(store, tmp_path):
    proc = run_cli(f"run={store['sweep']}", f"uri={store['uri']}", f"out={tmp_path / 'r'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in ("report.md", "report.html", "throughput-resnet50-train.png", "speedup.png"):
        assert (tmp_path / "r" / name).stat().st_size > 1000
    assert "7 finished, 1 failed" in proc.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--experiment", "nope"], "no experiment 'nope'"),
        (["--run", "f" * 32], "no run 'fff"),
        (["--experiment", "all-failed"], "no finished runs"),
    ],
    ids=["unknown-experiment", "unknown-run", "nothing-finished"],
)
def test_cli_bad_input_is_one_line_and_nonzero(store, tmp_path, args, expected):
    proc = run_cli(*args, "--uri", store["uri"], cwd=tmp_path)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "reports").exists()


# ---- the sweep hook ------------------------------------------------------------------------------
def compose_sweep(tmp_path: Path, uri: str, *overrides: str):
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(
            config_name="config",
            overrides=[f"tracking.uri={uri}", f"hydra.sweep.dir={tmp_path / 'sweep'}", *overrides],
            return_hydra_config=True,
        )


@pytest.fixture(autouse=True)
def fresh_sweep_state():
    """The hook tests drive the real SweepTracking, whose state is process-wide: leave none behind
    (a leftover parent would adopt later tests' job runs)."""
    yield
    STATE.__init__()
    os.environ.pop(PARENT_ENV, None)


def hook_sweep(cfg, uri: str) -> tuple[MlflowClient, str]:
    """What Hydra does around a multirun: start callback, jobs (logged directly here), end callback."""
    cb = SweepTracking()
    cb.on_multirun_start(config=cfg)
    client, eid = open_store(uri, "dlbench")
    parent = ensure_parent().run_id  # what the sweep's first job run does
    log_job(client, eid, parent, "torch resnet50 fp32 train", (95, 100, 105), metrics=GPU)
    log_job(client, eid, parent, "torch resnet50 amp train", (190, 200, 210), metrics=GPU)
    tally = SweepTally(finished=["job 0", "job 1"])
    finish_sweep(tally)  # what src/run.py does when the sweep's jobs have run
    return client, parent


def test_hook_logs_the_report_on_the_parent_run(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, parent = hook_sweep(compose_sweep(tmp_path, uri), uri)
    assert client.get_run(parent).info.status == "FINISHED"
    logged = sorted(a.path for a in client.list_artifacts(parent, "report"))
    assert "report/report.html" in logged and "report/report.md" in logged
    assert "report/throughput-resnet50-train.png" in logged
    assert (tmp_path / "sweep" / "report" / "report.html").is_file()
    local = client.download_artifacts(parent, "report/report.md", str(tmp_path / "dl"))
    assert "mixed precision (amp) speeds up torch on resnet50 train by 2.00×." in Path(local).read_text()


def test_hook_respects_report_enabled_false(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, parent = hook_sweep(compose_sweep(tmp_path, uri, "report.enabled=false"), uri)
    assert client.list_artifacts(parent, "report") == []
    assert not (tmp_path / "sweep" / "report").exists()


def test_a_report_failure_never_fails_the_sweep(tmp_path, caplog):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = compose_sweep(tmp_path, uri)
    (tmp_path / "sweep").write_text("a file where the sweep folder should be: the report cannot be written")
    with caplog.at_level(logging.WARNING, logger="dlbench"):
        client, parent = hook_sweep(cfg, uri)
    assert client.get_run(parent).info.status == "FINISHED"
    assert any("report: not made" in r.getMessage() for r in caplog.records)


# ---- presets -------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["gpu_matrix", "gpu_optimizer", "gpu_compile", "gpu_vgg16", "gpu_dali"])
def test_the_gpu_sweeps_are_presets_whose_every_job_is_valid(preset):
    """The GPU measurement sweeps (results/h200/), once shell scripts, compose into valid CUDA jobs."""
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"+experiment={preset}"], return_hydra_config=True)
        params = dict(cfg.hydra.sweeper.params)
        assert params
        for key, values in params.items():
            for value in values.split(","):
                overrides = [f"+experiment={preset}", f"{key}={value}", "dataset.path=/data/jpegs"]
                job = JobConfig.from_dict(OmegaConf.to_container(compose("config", overrides), resolve=True))
                validate(job)
                assert (job.device, job.framework.name, job.schedule.windows) == ("cuda", "torch", 8)


def test_presets_compose():
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        quick = compose(config_name="config", overrides=["+experiment=quick"], return_hydra_config=True)
        synced = compose(config_name="config", overrides=["+experiment=synced2019"], return_hydra_config=True)
        s = quick.schedule
        assert (s.warmup_steps, s.windows, s.steps_per_window) == (3, 3, 5)
        params = dict(synced.hydra.sweeper.params)
        assert params == {
            "framework": "tf,torch,mxnet",
            "model": "resnet50,vgg16,resnet_cifar,ncf,ssd300,transformer",
            "precision": "fp32,amp",
            "mode": "train,infer",
        }
        # every value the sweep will use composes into a valid job (batch sizes: the models' defaults)
        batch = {}
        for key, values in params.items():
            for value in values.split(","):
                cfg = compose(config_name="config", overrides=["+experiment=synced2019", f"{key}={value}"])
                if key == "model":
                    batch[value] = cfg.model.batch_size
        assert batch == {
            "resnet50": 64,
            "vgg16": 64,
            "resnet_cifar": 128,
            "ncf": 16384,
            "ssd300": 32,
            "transformer": 64,
        }


def test_amp_without_autocast_is_not_called_mixed_precision(tmp_path):
    """precision=amp precision.autocast=false ran a pure bfloat16 network (its verified tags say so):
    the speed finding names what ran, never "mixed precision"."""
    client, eid = open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "dlbench")
    sweep = make_sweep(client, eid, "precision=fp32,amp precision.autocast=false")
    pure = {"precision.compute_dtype": "bfloat16", "precision.param_dtype": "bfloat16"}
    pure |= {"precision.autocast": "off", "precision.loss_scale": "none"}
    log_job(client, eid, sweep.run_id, "torch resnet50 fp32 train", (95, 100, 105))
    log_job(client, eid, sweep.run_id, "torch resnet50 amp train", (190, 200, 210), tags=pure)
    sweep.finish("FINISHED")
    texts = [
        f.text
        for f in analyze(
            select(client, f"sqlite:///{tmp_path / 'mlflow.db'}", run_id=sweep.run_id).jobs
        ).findings
    ]
    assert "amp (pure bfloat16, bfloat16 weights) speeds up torch on resnet50 train by 2.00×." in texts
    assert not any("mixed" in t for t in texts)


def test_a_framework_difference_on_a_host_bound_gpu_says_so(tmp_path):
    """A GPU busy 45% of the timed phase waited on its host: the finding that puts that run behind another
    says the gap is the host's dispatch. Too few samples to tell, and no finding says it."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "framework=torch,tf,jax")
    job = functools.partial(log_job, client, eid, sweep.run_id)
    job("tf resnet50 amp train", (490, 500, 510), metrics=GPU | {"telemetry_samples": 50})
    job(
        "torch resnet50 amp train",
        (190, 200, 210),
        metrics=GPU | {"gpu_util_mean": 45.0, "telemetry_samples": 50},
    )
    few = GPU | {"gpu_util_mean": 30.0, "telemetry_samples": 3}
    job("jax resnet50 amp train", (90, 100, 110), metrics=few, knobs={"jit": False})  # eager, as the others
    sweep.finish("FINISHED")
    analysis = analyze(select(client, uri, run_id=sweep.run_id).jobs)
    (finding,) = [f.text for f in analysis.findings if f.kind == "framework"]
    assert "tf is 2.5× faster than torch and 5.0× faster than jax" in finding
    assert "Host-bound: torch kept the GPU busy 45% of the timed phase" in finding
    assert "jax kept" not in finding  # 3 samples: its 30% may describe the warm-up
    frame = analysis.frame().set_index("framework")
    assert frame.host_bound.to_dict() == {"tf": False, "torch": True, "jax": False}  # report.csv's column
