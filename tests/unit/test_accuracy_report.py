"""The report's Accuracy section, on `mode=converge` runs written into a real sqlite MLflow store the way
jobs write them (flattened job config as params, summary metrics, `eval/<metric>` per epoch)."""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from dlbench.config import JobConfig
from dlbench.report import build_report
from dlbench.report.accuracy import Cell, non_finite
from dlbench.report.accuracy_render import accuracy_table
from dlbench.report.load import job_row
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import open_store
from tests.unit.test_report import log_job, make_sweep

TARGET = 0.85
EPOCH_S = 20.0


def log_converge(
    client: MlflowClient,
    experiment_id: str,
    parent_id: str | None,
    what: str,
    seed: int,
    curve: list[float],
    dataset: str = "fashion_mnist",
    status: str = "FINISHED",
    tags: dict[str, str] | None = None,
) -> str:
    """One converge job as the orchestrator records it; what = "framework model precision", curve = the
    held-out accuracy after each epoch (NaN where the training diverged)."""
    framework, model, precision = what.split()
    job = JobConfig.from_dict(
        {"framework": {"name": framework}, "model": {"name": model}, "precision": {"name": precision}}
    )
    params = flatten(job.to_dict()) | {
        "mode": "converge",
        "dataset.name": dataset,
        "schedule.seed": seed,
        "schedule.epochs": len(curve),
        "schedule.target": TARGET,
    }
    run = RunLogger.create(client, experiment_id, f"{what} seed {seed}", parent_id, {"dlbench.kind": "job"})
    run.params(params)
    for epoch, value in enumerate(curve, start=1):
        run.metrics({"eval/accuracy": value}, step=epoch)
    reached = next((e for e, v in enumerate(curve, start=1) if v >= TARGET), None)
    finite = [v for v in curve if math.isfinite(v)]
    summary = {
        "eval_final": curve[-1],
        "eval_best": max(finite) if finite else math.nan,
        "train_s": EPOCH_S * len(curve),
        "throughput": 1000.0 + seed,
    }
    if reached:
        summary |= {"epochs_to_target": reached, "time_to_target_s": EPOCH_S * reached}
    run.metrics(summary)
    run.tags({"dlbench.eval_metric": "accuracy", "device": "cpu", **(tags or {})})
    run.finish(status)
    return run.run_id


DIVERGED = {"dlbench.loss_flag": "non-finite", "dlbench.eval_flag": "non-finite"}
FINALS = {
    # torch: amp within fp32's seed range -> a match
    ("torch", "fp32"): [0.880, 0.884, 0.882],
    ("torch", "amp"): [0.879, 0.885, 0.881],
    # tf: every amp seed below every fp32 seed -> loses 3.10 points
    ("tf", "fp32"): [0.880, 0.882, 0.881],
    ("tf", "amp"): [0.850, 0.852, 0.848],
    # mxnet: amp seed 1 diverges -> flagged, never a match although the other seeds agree with fp32
    ("mxnet", "fp32"): [0.870, 0.875, 0.872],
    ("mxnet", "amp"): [math.nan, 0.873, 0.871],
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict:
    db = tmp_path_factory.mktemp("accuracy") / "mlflow.db"
    uri = f"sqlite:///{db}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "+experiment=accuracy")
    log = functools.partial(log_converge, client, eid, sweep.run_id)
    # an older run of torch fp32 seed 1, superseded by the one logged after it
    log("torch small_cnn fp32", 1, [0.5, 0.5, 0.5])
    time.sleep(0.01)
    ids = {}
    for (fw, precision), finals in FINALS.items():
        for seed, final in enumerate(finals, start=1):
            curve = [0.80, 0.84, final] if math.isfinite(final) else [0.80, math.nan, math.nan]
            tags = DIVERGED if not math.isfinite(final) else None
            ids[(fw, precision, seed)] = log(f"{fw} small_cnn {precision}", seed, curve, tags=tags)
    # digits: one seed per precision, never reaching the target
    log("torch small_cnn fp32", 1, [0.70, 0.80], dataset="digits")
    log("torch small_cnn amp", 1, [0.70, 0.81], dataset="digits")
    ids["failed"] = log("tf small_cnn fp32", 4, [0.8], status="FAILED", tags={"failure": "crash"})
    # a speed run in the same sweep keeps its own table
    log_job(client, eid, sweep.run_id, "torch resnet_cifar fp32 train", (9, 10, 11))
    sweep.finish("FINISHED")
    only = make_sweep(client, eid, "+experiment=accuracy framework=torch")
    for seed in (1, 2):
        log_converge(client, eid, only.run_id, "torch small_cnn fp32", seed, [0.8, 0.86])
    only.finish("FINISHED")
    return {"uri": uri, "client": client, "sweep": sweep.run_id, "only": only.run_id, "ids": ids}


@pytest.fixture(scope="module")
def report(store: dict, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("report")
    return build_report(store["client"], store["uri"], out, run_id=store["sweep"])


def _cell(report, dataset: str, framework: str, precision: str) -> Cell:
    task = next(t for t in report.accuracy.tasks if t.dataset == dataset)
    return next(c for c in task.cells if (c.framework, c.precision) == (framework, precision))


def _verdict(report, framework: str, dataset: str = "fashion_mnist"):
    return next(v for v in report.accuracy.verdicts if v.framework == framework and dataset in v.task)


def test_tasks_cells_and_seed_statistics(report) -> None:
    acc = report.accuracy
    assert [t.title for t in acc.tasks] == [
        "small_cnn on digits: accuracy",
        "small_cnn on fashion_mnist: accuracy",
    ]
    fashion = acc.tasks[1]
    assert [(c.framework, c.precision) for c in fashion.cells] == [
        ("tf", "fp32"), ("tf", "amp"), ("torch", "fp32"), ("torch", "amp"), ("mxnet", "fp32"), ("mxnet", "amp"),
    ]  # fmt: skip
    torch_fp32 = _cell(report, "fashion_mnist", "torch", "fp32")
    assert sorted(torch_fp32.finals) == [0.880, 0.882, 0.884]  # the superseded 0.5 run is not among them
    assert torch_fp32.mean == pytest.approx(0.882) and torch_fp32.std == pytest.approx(0.002)
    assert fashion.target == TARGET


def test_verdicts_follow_the_seed_spread(report) -> None:
    torch_v, tf_v = _verdict(report, "torch"), _verdict(report, "tf")
    assert torch_v.kind == "matches" and "matches fp32 within the seed spread" in torch_v.text
    assert tf_v.kind == "loses"
    assert "loses 3.10 points of accuracy" in tf_v.text
    assert tf_v.text == (
        "tf, small_cnn on fashion_mnist: mixed precision (amp = bf16 on CPU) loses 3.10 points of accuracy "
        "against fp32 (accuracy in points: fp32 88.10 ± 0.10 (3 seeds), amp 85.00 ± 0.20 (3 seeds))."
    )
    digits = _verdict(report, "torch", "digits")
    assert digits.kind == "no-spread" and "fewer than two seeds" in digits.text


def test_a_diverged_seed_is_flagged_and_never_a_match(report) -> None:
    mx_amp = _cell(report, "fashion_mnist", "mxnet", "amp")
    assert len(mx_amp.flagged) == 1 and len(mx_amp.sound) == 2
    assert mx_amp.mean == pytest.approx(0.872)  # NaN seed left out of the mean
    v = _verdict(report, "mxnet")
    assert v.kind == "diverged" and "not a match" in v.text and "1 of 3 seeds" in v.text
    assert not any(x.kind == "matches" and x.framework == "mxnet" for x in report.accuracy.verdicts)
    row = dict(zip(*_table(report, "fashion_mnist", "mxnet", "amp"), strict=True))
    assert row["flag"] == "⚠ 1 of 3 seeds NaN/inf" and row["final accuracy (mean ± std)"] == "0.8720 ± 0.0014"


def test_a_nan_metric_alone_is_enough_to_flag(store: dict) -> None:
    """Even without the tags, a NaN final metric marks the run as diverged."""
    client = store["client"]
    clean = job_row(client.get_run(store["ids"][("torch", "amp", 1)]))
    assert not non_finite(clean)
    client.set_tag(clean.run_id, "dlbench.eval_flag", "non-finite")
    assert non_finite(job_row(client.get_run(clean.run_id)))
    client.delete_tag(clean.run_id, "dlbench.eval_flag")
    flagged = job_row(client.get_run(store["ids"][("mxnet", "amp", 1)]))
    assert math.isnan(flagged.metric("eval_final")) and non_finite(flagged)


def _table(report, dataset: str, framework: str, precision: str) -> tuple[list[str], list[str]]:
    task = next(t for t in report.accuracy.tasks if t.dataset == dataset)
    table = accuracy_table(task)
    i = [(c.framework, c.precision) for c in task.cells].index((framework, precision))
    return table.headers, table.rows[i]


def test_table_cells(report) -> None:
    row = dict(zip(*_table(report, "fashion_mnist", "torch", "amp"), strict=True))
    assert row["precision"] == "amp = bf16 on CPU"
    assert row["seeds"] == "3 (1, 2, 3)"
    assert row["final accuracy (mean ± std)"] == "0.8817 ± 0.0031"
    assert row["seed range"] == "0.8790–0.8850"
    assert row["epochs to 0.85"] == "3.0 (3/3)" and row["time to 0.85 (s)"] == "60.0 (3/3)"
    assert row["train time (s)"] == "60.0" and row["train throughput (samples/s)"] == "1,002"
    assert row["flag"] == ""
    digits = dict(zip(*_table(report, "digits", "torch", "fp32"), strict=True))
    assert digits["epochs to 0.85"] == "not reached (0/1)" and digits["seed range"] == "–"
    assert dict(zip(*_table(report, "fashion_mnist", "torch", "fp32"), strict=True))["precision"] == "fp32"


def test_report_files_hold_the_section(report, store: dict) -> None:
    md = report.markdown.read_text()
    assert "## Accuracy" in md and "### small_cnn on fashion_mnist: accuracy" in md
    assert "loses 3.10 points" in md and "⚠ marks seeds whose loss or held-out metric was NaN" in md
    charts = sorted(p.name for p in report.images if p.name.startswith("accuracy-"))
    assert charts == ["accuracy-small-cnn-digits.png", "accuracy-small-cnn-fashion-mnist.png"]
    assert all(p.stat().st_size > 10_000 for p in report.images)
    html = report.html.read_text()
    assert 'id="table-accuracy-small-cnn-fashion-mnist"' in html and 'id="accuracy-verdicts"' in html
    # converge runs stay out of the speed tables; the failed one is listed; the speed run keeps its table
    assert [g.title for g in report.analysis.groups] == ["resnet_cifar train"]
    assert [j.run_id for j in report.analysis.failed] == [store["ids"]["failed"]]
    assert "Jobs: 21 finished, 1 failed or unfinished" in md  # 18 + 2 digits converge runs + 1 speed run


def test_an_accuracy_only_sweep_has_no_speed_findings(store: dict, tmp_path: Path) -> None:
    rep = build_report(store["client"], store["uri"], tmp_path, run_id=store["only"])
    md = rep.markdown.read_text()
    assert "## Findings" not in md and "## Accuracy" in md
    assert "No reduced precision was run beside fp32" in md
    assert _cell(rep, "fashion_mnist", "torch", "fp32").mean == pytest.approx(0.86)


def test_the_throughput_column_names_the_tasks_unit(report) -> None:
    from dataclasses import replace

    task = next(t for t in report.accuracy.tasks if t.dataset == "digits")
    assert "train throughput (samples/s)" in accuracy_table(task).headers
    cells = [replace(c, runs=[replace(j, unit="target tokens") for j in c.runs]) for c in task.cells]
    assert "train throughput (target tokens/s)" in accuracy_table(replace(task, cells=cells)).headers
