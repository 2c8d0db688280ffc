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
from dlbench.report.accuracy import Cell, analyze_accuracy, non_finite
from dlbench.report.accuracy_render import accuracy_table
from dlbench.report.equivalence import Margins
from dlbench.report.load import job_row
from dlbench.tracking.resume import config_hash
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import open_store
from dlbench.tracking.sweep import STATE, SweepTracking
from tests.unit.test_report import compose_sweep, log_job, make_sweep, run_cli

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
    params: dict[str, object] | None = None,
) -> str:
    """One converge job as the orchestrator records it; what = "framework model precision", curve = the
    held-out accuracy after each epoch (NaN where the training diverged). Its precision tags are what a CPU
    run verifies (amp: mixed bfloat16), `tags` may replace them; `params` adds to the job's config."""
    framework, model, precision = what.split()
    job = JobConfig.from_dict(
        {"framework": {"name": framework}, "model": {"name": model}, "precision": {"name": precision}}
    )
    params = (
        flatten(job.to_dict())
        | {
            "mode": "converge",
            "dataset.name": dataset,
            "schedule.seed": seed,
            "schedule.epochs": len(curve),
            "schedule.target": TARGET,
        }
        | (params or {})
    )
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
    verified = PRECISION_TAGS[precision] | {"dlbench.config_hash": config_hash(params)}
    run.tags({"dlbench.eval_metric": "accuracy", "device": "cpu", **verified, **(tags or {})})
    run.finish(status)
    return run.run_id


FP32_TAGS = {"compute_dtype": "float32", "param_dtype": "float32", "autocast": "off", "loss_scale": "none"}
AMP_CPU_TAGS = FP32_TAGS | {"compute_dtype": "bfloat16", "autocast": "cpu/bfloat16"}
PURE_BF16_TAGS = FP32_TAGS | {"compute_dtype": "bfloat16", "param_dtype": "bfloat16"}  # amp, autocast=false
PRECISION_TAGS = {
    name: {f"precision.{k}": v for k, v in tags.items()}
    for name, tags in (("fp32", FP32_TAGS), ("amp", AMP_CPU_TAGS), ("pure_bf16", PURE_BF16_TAGS))
}
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


CASES = {
    # fp32 .90/.90/.90/.60 vs amp .61/.62/.63: the ranges overlap, amp is 20.5 points lower on average
    "case_ranges": {("torch", "fp32"): [0.90, 0.90, 0.90, 0.60], ("torch", "amp"): [0.61, 0.62, 0.63]},
    # two seeds each, .552/.644 vs .552/.639: far too spread to call equivalent at δ = 1% of fp32
    "case_two": {("tf", "fp32"): [0.552, 0.644], ("tf", "amp"): [0.552, 0.639]},
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
    # the cases: overlapping seed ranges that the old rule called a match
    for dataset, cases in CASES.items():
        for (fw, precision), finals in cases.items():
            for seed, final in enumerate(finals, start=1):
                log(f"{fw} small_cnn {precision}", seed, [0.5, final], dataset=dataset)
    # amp with autocast=false on the CPU: a pure bfloat16 network, its own cell beside the real amp runs;
    # and a torch fp32 seed 1 run with another learning rate: listed beside the first, not replacing it
    pure = {"precision.autocast": False, "precision.cpu_dtype": "bfloat16"}
    for seed, final in enumerate([0.860, 0.861, 0.859], start=1):
        tags = PRECISION_TAGS["pure_bf16"]
        ids[("pure", seed)] = log(
            "torch small_cnn amp", seed, [0.8, final], "case_ranges", tags=tags, params=pure
        )
    for seed, (fp32, amp) in enumerate([(0.80, 0.80), (0.81, 0.81)], start=1):
        log("tf small_cnn fp32", seed, [0.5, fp32], "case_dup")
        log("tf small_cnn amp", seed, [0.5, amp], "case_dup")
    ids["other_lr"] = log("tf small_cnn fp32", 1, [0.5, 0.70], "case_dup", params={"model.lr": 0.5})
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


def _cell(report, dataset: str, framework: str, precision: str, ran: str = "") -> Cell:
    task = next(t for t in report.accuracy.tasks if t.dataset == dataset)
    return next(
        c for c in task.cells if (c.framework, c.precision) == (framework, precision) and ran in c.label
    )


def _verdict(report, framework: str, dataset: str = "fashion_mnist", ran: str = ""):
    return next(
        v
        for v in report.accuracy.verdicts
        if v.framework == framework and f"on {dataset}:" in v.task and ran in v.text
    )


def test_tasks_cells_and_seed_statistics(report) -> None:
    acc = report.accuracy
    assert [t.title for t in acc.tasks] == [
        f"small_cnn on {d}: accuracy"
        for d in ("case_dup", "case_ranges", "case_two", "digits", "fashion_mnist")
    ]
    fashion = acc.tasks[-1]
    assert [(c.framework, c.precision) for c in fashion.cells] == [
        ("tf", "fp32"), ("tf", "amp"), ("torch", "fp32"), ("torch", "amp"), ("mxnet", "fp32"), ("mxnet", "amp"),
    ]  # fmt: skip
    torch_fp32 = _cell(report, "fashion_mnist", "torch", "fp32")
    assert sorted(torch_fp32.finals) == [0.880, 0.882, 0.884]  # the superseded 0.5 run is not among them
    assert torch_fp32.mean == pytest.approx(0.882) and torch_fp32.std == pytest.approx(0.002)
    assert fashion.target == TARGET


def test_verdicts_are_intervals_read_against_delta(report) -> None:
    torch_v, tf_v = _verdict(report, "torch"), _verdict(report, "tf")
    # torch: interval [-0.66, +0.59] points lies inside ±0.88 (1% of 88.2)
    assert torch_v.kind == "matches" and "matches fp32 within δ" in torch_v.text
    assert "95% interval [-0.66, +0.59], δ ±0.88 points (1% of fp32's mean)" in torch_v.text
    assert tf_v.kind == "worse"
    assert tf_v.text == (
        "tf, small_cnn on fashion_mnist: amp (mixed bfloat16) is worse than fp32: the interval excludes 0 "
        "(difference -3.10 points, 95% interval [-3.52, -2.68], δ ±0.88 points (1% of fp32's mean); "
        "accuracy in points: fp32 88.10 ± 0.10 (seeds 1, 2, 3), amp 85.00 ± 0.20 (seeds 1, 2, 3))."
    )
    digits = _verdict(report, "torch", "digits")
    assert digits.kind == "no-spread" and "fewer than two seeds" in digits.text


def test_overlapping_seed_ranges_are_never_a_match(report) -> None:
    """The cases the seed-range rule called matches: AMP 20.5 points lower with overlapping ranges, and
    two seeds each whose spread dwarfs any sensible δ."""
    ranges = _verdict(report, "torch", "case_ranges", "amp (mixed")
    assert ranges.kind == "inconclusive" and "-20.50 points" in ranges.text
    assert "seeds 1, 2, 3, 4" in ranges.text and "δ ±0.83 points" in ranges.text
    # one more seed each at the same spread: t(4 df) x 6.7 points = 18.7 < 20.5, the interval would exclude 0
    assert "about 1 more seed per precision would settle it" in ranges.text
    two = _verdict(report, "tf", "case_two")
    assert two.kind == "inconclusive" and "neither lies inside ±δ nor excludes 0" in two.text
    assert "fp32 59.80 ± 6.51 (seeds 1, 2), amp 59.55 ± 6.15 (seeds 1, 2)" in two.text
    more = int(two.text.split("about ")[1].split(" more seed")[0].replace(",", ""))
    assert 100 < more < 10_000  # estimated from the spread: a lot, not "one more"
    wide = analyze_accuracy(report.selection.jobs, Margins(absolute={"accuracy": 0.5}))
    assert next(v for v in wide.verdicts if "case_two" in v.task).kind == "matches"  # δ wide enough
    tight = analyze_accuracy(report.selection.jobs, Margins(relative=0.001))
    assert next(v for v in tight.verdicts if "fashion_mnist" in v.task and v.framework == "torch").kind == (
        "inconclusive"
    )


def test_a_cell_is_named_by_what_ran(report) -> None:
    """amp with autocast=false ran a pure bfloat16 network: its own cell, never called mixed precision,
    and the real amp runs of the same seeds stay (nothing replaced)."""
    pure = _cell(report, "case_ranges", "torch", "amp", "pure")
    mixed = _cell(report, "case_ranges", "torch", "amp", "mixed")
    assert pure.label == "pure bfloat16, bfloat16 weights" and mixed.label == "mixed bfloat16"
    assert pure.seeds == mixed.seeds == ["1", "2", "3"]
    verdict = _verdict(report, "torch", "case_ranges", "amp (pure")
    assert "mixed" not in verdict.text and verdict.kind == "inconclusive"
    assert verdict.text.startswith(
        "torch, small_cnn on case_ranges: amp (pure bfloat16, bfloat16 weights) against"
    )


def test_runs_of_one_seed_with_different_settings_are_listed_not_replaced(report, store: dict) -> None:
    tf_fp32 = _cell(report, "case_dup", "tf", "fp32")
    assert len(tf_fp32.runs) == 3 and tf_fp32.duplicates == ["1"]
    assert store["ids"]["other_lr"] in [j.run_id for j in tf_fp32.runs]
    v = _verdict(report, "tf", "case_dup")
    assert v.kind == "duplicates" and "seed(s) 1 more than once" in v.text
    row = dict(zip(*_table(report, "case_dup", "tf", "fp32"), strict=True))
    assert row["seeds"] == "3 (1, 1, 2; seed 1 more than once)"


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
    assert row["precision"] == "amp (mixed bfloat16)"
    assert row["seeds"] == "3 (1, 2, 3)"
    assert row["final accuracy (mean ± std)"] == "0.8817 ± 0.0031"
    assert row["seed range"] == "0.8790–0.8850"
    assert row["epochs to 0.85"] == "3.0 (3/3)" and row["time to 0.85 (s)"] == "60.0 (3/3)"
    assert row["train time (s)"] == "60.0" and row["train throughput (samples/s)"] == "1,002"
    assert row["flag"] == ""
    digits = dict(zip(*_table(report, "digits", "torch", "fp32"), strict=True))
    assert digits["epochs to 0.85"] == "not reached (0/1)" and digits["seed range"] == "–"
    assert (
        dict(zip(*_table(report, "fashion_mnist", "torch", "fp32"), strict=True))["precision"]
        == "fp32 (float32)"
    )


def test_report_files_hold_the_section(report, store: dict) -> None:
    md = report.markdown.read_text()
    assert "## Accuracy" in md and "### small_cnn on fashion_mnist: accuracy" in md
    assert "is worse than fp32" in md and "⚠ marks seeds whose loss or held-out metric was NaN" in md
    charts = sorted(p.name for p in report.images if p.name.startswith("accuracy-"))
    names = ("case-dup", "case-ranges", "case-two", "digits", "fashion-mnist")
    assert charts == [f"accuracy-small-cnn-{d}.png" for d in names]
    assert all(p.stat().st_size > 10_000 for p in report.images)
    html = report.html.read_text()
    assert 'id="table-accuracy-small-cnn-fashion-mnist"' in html and 'id="accuracy-verdicts"' in html
    # converge runs stay out of the speed tables; the failed one is listed; the speed run keeps its table
    assert [g.title for g in report.analysis.groups] == ["resnet_cifar train"]
    assert [j.run_id for j in report.analysis.failed] == [store["ids"]["failed"]]
    # 18 + 2 digits + 10 case_ranges + 4 case_two + 5 case_dup converge runs + 1 speed run
    assert "Jobs: 40 finished, 1 failed or unfinished" in md


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


def test_the_cli_takes_delta_per_metric(store: dict, tmp_path: Path) -> None:
    out = tmp_path / "wide"
    proc = run_cli(
        f"--run={store['sweep']}",
        f"--uri={store['uri']}",
        f"--out={out}",
        "--delta",
        "accuracy=0.5",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    md = (out / "report.md").read_text()
    assert "tf, small_cnn on case_two: amp (mixed bfloat16) matches fp32 within δ" in md
    assert "δ ±50.00 points (report.delta)" in md
    bad = run_cli(f"--run={store['sweep']}", f"--uri={store['uri']}", "--delta", "accuracy", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr
    assert "--delta accuracy: give METRIC=VALUE" in bad.stderr


def test_the_sweep_hook_reads_delta_from_the_config(tmp_path: Path) -> None:
    cfg = compose_sweep(
        tmp_path, f"sqlite:///{tmp_path / 'm.db'}", "report.delta.hr10=0.02", "report.equivalence=0.02"
    )
    SweepTracking().on_multirun_start(cfg)
    assert (STATE.pending.delta, STATE.pending.equivalence) == ({"hr10": 0.02}, 0.02)
