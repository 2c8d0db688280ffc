"""`python yardsticks/page.py` on a real sqlite MLflow store: ratios stay inside one run and one optimizer,
and a job whose loss went NaN is listed as diverged and never enters a ratio."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from dlbench.config import JobConfig
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import open_store
from tests.conftest import ROOT
from yardsticks.page import digest


def make_page(out: Path, *args: str) -> subprocess.CompletedProcess:
    """yardsticks/page.py as a user runs it, the page written to `out` (.md and .csv)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "yardsticks/page.py"), *args, "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def log(
    client,
    eid: str,
    data: str,
    optimizer: str,
    throughput: float,
    loss: float,
    model: str = "resnet50",
    decode: str = "auto",
    tags: dict | None = None,
) -> None:
    job = JobConfig.from_dict({"model": {"name": model}, "precision": {"name": "amp"}, "mode": "train"})
    job.dataset.name, job.device, job.framework.optimizer_impl = data, "cuda", optimizer
    job.data.decode, job.data.num_threads = decode, 14 if decode == "cpu" else 4
    run = RunLogger.create(client, eid, f"{data}-{optimizer}", None, {"dlbench.kind": "job"})
    run.params(flatten(job.to_dict()) | {"batch_size": 256})
    run.metrics({"throughput": throughput, "loss_last": loss, "data_wait_frac": 0.01, "gpu_util_mean": 90.0})
    run.tags({"precision.optimizer": f"sgd/{optimizer}", **(tags or {})})
    run.finish("FINISHED")


def test_page_ratios_skip_diverged_jobs_and_other_optimizers(tmp_path):
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    log(client, eid, "synthetic", "fused", 6000.0, float("nan"))  # diverged: fast, and meaningless
    guards = {
        "dlbench.gpu_flag": "shared",
        "dlbench.clock_flag": "clock-drop",
        "guard.clock_events": "sw_power_cap 71%",
    }
    log(client, eid, "synthetic", "foreach", 5000.0, 3.0, tags=guards)
    log(client, eid, "imagenet", "foreach", 4500.0, 3.1)
    log(client, eid, "imagenet", "fused", 5900.0, float("nan"))
    bare = tmp_path / "bare.jsonl"
    rows = [("foreach", 5050.0), ("fused", 6100.0)]
    bare.write_text("".join(
        "BARE " + json.dumps({"precision": "amp", "compile": False, "optimizer": o, "samples_per_s": s}) + "\n"
        for o, s in rows
    ))  # fmt: skip
    out = tmp_path / "page"
    proc = make_page(out, "--source", "gpu", str(db), str(bare))
    assert proc.returncode == 0, proc.stderr
    md = out.with_suffix(".md").read_text()
    ratios = [line for line in md.splitlines() if line.startswith("- [gpu]")]
    assert ratios == [
        "- [gpu] harness vs hand-written loop, PyTorch ResNet-50 AMP train, SGD foreach: 5,000 vs 5,050 img/s = 99.0% (goal ≥ 99%).",
        "- [gpu] DALI-fed (GPU decode, 4 threads) vs synthetic, ResNet-50 amp train, SGD foreach: 4,500 vs 5,000 img/s = 90.0% "
        "(data_wait 1.0%, GPU util 90% vs 90%; goal ≥ 97%).",
    ]  # fmt: skip
    assert md.count("FINISHED, diverged") == 2
    # each job's guard tags, "-" where the guards found nothing
    table = [line for line in md.splitlines() if line.startswith("| gpu |")]
    assert [line.rsplit("|", 2)[1].strip() for line in table].count(
        "gpu: shared; clock: clock-drop; sw_power_cap 71%"
    ) == 1
    assert [line.rsplit("|", 2)[1].strip() for line in table].count("-") == 3
    # provenance: which data made the page
    assert "## Provenance" in md and f"- Source gpu: mlflow.db sha256 {digest(db)} (4 jobs)" in md


def log_job(client, eid: str, model: str, mode: str, precision: str, throughput: float, **extra) -> None:
    """A finished synthetic job of any model, as the worker records it (the optimizer in `run.optimizer`)."""
    task = {"transformer": {"task": "translation", "batch_tokens": extra.get("tokens", 5120)}}.get(model, {})
    job = JobConfig.from_dict(
        {"model": {"name": model, **task}, "precision": {"name": precision}, "mode": mode}
    )
    job.device = "cuda"
    job.framework.compile = extra.get("compile_mode") is not None
    job.framework.compile_mode = extra.get("compile_mode") or "default"
    run = RunLogger.create(client, eid, f"{model}-{mode}-{precision}", None, {"dlbench.kind": "job"})
    run.params(flatten(job.to_dict()) | {"batch_size": extra.get("batch", 64)})
    run.metrics({"throughput": throughput, "loss_last": 0.5, "warmup_s": 50.0})
    if mode == "train":
        run.tags({"run.optimizer": extra["optimizer"]})
    if "gpu" in extra:
        run.tags({"version.gpu": extra["gpu"]})
    run.finish("FINISHED")


def page_lines(
    tmp_path: Path, db: Path, name: str, bare_lines: list[dict] | None = None, kind: str = ""
) -> list[str]:
    """The page's ratio lines (`- [name] <kind>...`), in page order, for the store `db` and these BARE lines as
    source `name`."""
    source = ["--source", name, str(db)]
    if bare_lines is not None:
        bare = tmp_path / "bare.jsonl"
        bare.write_text("".join("BARE " + json.dumps(b) + "\n" for b in bare_lines))
        source.append(str(bare))
    out = tmp_path / "page"
    proc = make_page(out, *source)
    assert proc.returncode == 0, proc.stderr
    return [
        line
        for line in out.with_suffix(".md").read_text().splitlines()
        if line.startswith(f"- [{name}] {kind}")
    ]


def log_config(
    client, eid: str, name: str, config: dict, metrics: dict, tags: dict, batch: int = 256, drop: tuple = ()
) -> None:
    """One finished GPU job of `config` (JobConfig.from_dict keys, AMP unless it says), its params flattened
    as the orchestrator logs them (less the `drop` keys: a job from before they existed), with these metrics
    and tags."""
    job = JobConfig.from_dict({"precision": {"name": "amp"}, "device": "cuda", **config})
    run = RunLogger.create(client, eid, name, None, {"dlbench.kind": "job"})
    params = flatten(job.to_dict()) | {"batch_size": batch}
    run.params({k: v for k, v in params.items() if k not in drop})
    run.metrics(metrics)
    run.tags(tags)
    run.finish("FINISHED")


def test_page_pairs_every_yardstick_with_the_harness_job_of_its_configuration(tmp_path):
    """The yardsticks (bare_ncf/ssd300/transformer.py: model, mode, unit, throughput) and
    bare_loop.py (samples_per_s) are each matched to the harness job of the same model, mode, precision,
    compile mode, optimizer kernel (train) and batch; a non-finite yardstick loss voids its line, and a
    Transformer line timed with `--mask auto` (another attention kernel than the harness's) enters no ratio."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    log_job(client, eid, "ncf", "train", "bf16", 83.0e6, optimizer="adam/fused", batch=1048576)
    log_job(client, eid, "ncf", "infer", "amp", 190.0e6, batch=1048576)
    log_job(client, eid, "transformer", "infer", "bf16", 2000.0)
    log_job(client, eid, "transformer", "train", "amp", 130e3, optimizer="adam/fused", tokens=5120)
    log_job(client, eid, "transformer", "train", "amp", 530e3, optimizer="adam/fused", tokens=40960)
    log_job(client, eid, "resnet50", "train", "bf16", 6900.0, optimizer="sgd/fused", batch=256, compile_mode="reduce-overhead")  # fmt: skip
    log_job(client, eid, "resnet50", "train", "bf16", 7020.0, optimizer="sgd/fused", batch=384, compile_mode="reduce-overhead")  # fmt: skip
    log_job(client, eid, "resnet50", "train", "bf16", 2220.0, optimizer="sgd/fused", batch=64, compile_mode="default")  # fmt: skip
    log_job(client, eid, "resnet50", "train", "amp", 5930.0, optimizer="sgd/fused", batch=256, compile_mode="default", gpu="NVIDIA H100 80GB HBM3")  # fmt: skip
    bare = [
        {"model": "ncf", "mode": "train", "precision": "bf16", "compile": False, "optimizer": "fused",
         "batch": 1048576, "unit": "samples/s", "throughput": 80.0e6, "loss_finite": True},
        {"model": "ncf", "mode": "infer", "precision": "amp", "compile": False, "optimizer": "fused",
         "batch": 1048576, "unit": "samples/s", "throughput": 200.0e6, "loss_finite": True},
        {"model": "ncf", "mode": "train", "precision": "amp", "compile": False, "optimizer": "fused",
         "batch": 1048576, "unit": "samples/s", "throughput": 79.0e6, "loss_finite": True},  # no harness job
        {"model": "transformer", "mode": "infer", "precision": "bf16", "compile": False, "optimizer": "fused",
         "unit": "generated tokens/s", "throughput": 1000.0, "loss_finite": False},  # void
        {"model": "transformer", "mode": "train", "precision": "amp", "compile": False, "optimizer": "fused",
         "batch_tokens": 40960, "unit": "target tokens/s", "throughput": 500e3, "loss_finite": True},
        {"model": "transformer", "mode": "train", "precision": "amp", "compile": False, "optimizer": "fused",
         "batch_tokens": 40960, "mask": "auto", "unit": "target tokens/s", "throughput": 400e3, "loss_finite": True},
        {"model": "transformer", "mode": "train", "precision": "amp", "compile": False, "optimizer": "fused",
         "batch_tokens": 5120, "unit": "target tokens/s", "throughput": 140e3, "loss_finite": True},
        {"model": "resnet50", "batch": 256, "precision": "bf16", "mode": "train", "compile": True,
         "compile_mode": "reduce-overhead", "optimizer": "fused", "samples_per_s": 6000.0},
    ]  # fmt: skip
    bare_file = tmp_path / "bare.jsonl"
    bare_file.write_text("".join("BARE " + json.dumps(b) + "\n" for b in bare))
    out = tmp_path / "page"
    proc = make_page(out, "--source", "s", str(db), str(bare_file))
    assert proc.returncode == 0, proc.stderr
    ratios = [line for line in out.with_suffix(".md").read_text().splitlines() if line.startswith("- [s]")]
    assert ratios == [
        "- [s] harness vs hand-written loop, PyTorch NCF AMP infer: 190,000,000 vs 200,000,000 samples/s = 95.0% (goal ≥ 99%).",
        "- [s] harness vs hand-written loop, PyTorch NCF BF16 train, Adam fused: 83,000,000 vs 80,000,000 samples/s = 103.8% (goal ≥ 99%).",
        "- [s] harness vs hand-written loop, PyTorch ResNet-50 BF16 train, SGD fused, torch.compile reduce-overhead: 6,900 vs 6,000 img/s = 115.0% (goal ≥ 99%).",
        "- [s] harness vs hand-written loop, PyTorch Transformer AMP train, Adam fused: 130,000 vs 140,000 target tokens/s = 92.9% (goal ≥ 99%).",
        "- [s] harness vs hand-written loop, PyTorch Transformer AMP train, Adam fused: 530,000 vs 500,000 target tokens/s = 106.0% (goal ≥ 99%).",
        "- [s] torch.compile (default), ResNet-50 AMP train, SGD fused, batch 256: 5,930 img/s (the goal of 7,500 is for an H200); compilation is in warmup_s = 50 s.",
        "- [s] torch.compile (default), ResNet-50 BF16 train, SGD fused, batch 64: 2,220 img/s (the goal of 7,500 is for batch ≥ 256); compilation is in warmup_s = 50 s.",
        "- [s] torch.compile (reduce-overhead), ResNet-50 BF16 train, SGD fused, batch 256: 6,900 img/s (goal ≥ 7,500); compilation is in warmup_s = 50 s.",
        "- [s] torch.compile (reduce-overhead), ResNet-50 BF16 train, SGD fused, batch 384: 7,020 img/s (goal ≥ 7,500); compilation is in warmup_s = 50 s.",
    ]  # fmt: skip


def test_three_or_more_yardstick_runs_add_the_ratio_to_their_median(tmp_path):
    """A host-bound cell timed alternately (yardstick, harness, yardstick, ...) has yardstick runs that spread
    more than the goal: with three or more, the line gives the ratio to their median beside the range; with
    two, the range alone."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    log_job(client, eid, "transformer", "infer", "amp", 27000.0, tokens=40960)
    log_job(client, eid, "ncf", "infer", "amp", 190.0e6, batch=1048576)
    decode = {"model": "transformer", "mode": "infer", "precision": "amp", "compile": False,
              "batch_tokens": 40960, "unit": "generated tokens/s", "loss_finite": True}  # fmt: skip
    ncf = {"model": "ncf", "mode": "infer", "precision": "amp", "compile": False, "batch": 1048576,
           "unit": "samples/s", "loss_finite": True}  # fmt: skip
    bare = [decode | {"throughput": t} for t in (26000.0, 31000.0, 28000.0, 30000.0)]
    bare += [ncf | {"throughput": t} for t in (200.0e6, 180.0e6)]
    assert page_lines(tmp_path, db, "s", bare, "harness") == [
        "- [s] harness vs hand-written loop, PyTorch NCF AMP infer: 190,000,000 vs 180,000,000–200,000,000 samples/s = 95.0–105.6% (goal ≥ 99%).",
        "- [s] harness vs hand-written loop, PyTorch Transformer AMP infer: 27,000 vs 26,000–31,000 generated tokens/s = 87.1–103.8%, 93.1% of their median 29,000 (goal ≥ 99%).",
    ]  # fmt: skip


def test_dali_fed_ssd300_pairs_with_synthetic_ssd300_and_names_its_decoder(tmp_path):
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    log(client, eid, "synthetic", "fused", 1600.0, 3.0, model="ssd300")
    log(client, eid, "coco2017", "fused", 1520.0, 3.1, model="ssd300")
    log(client, eid, "synthetic", "fused", 6000.0, 3.0)
    log(client, eid, "imagenet", "fused", 5940.0, 3.0, decode="cpu")
    assert page_lines(tmp_path, db, "gpu") == [
        "- [gpu] DALI-fed (CPU decode, 14 threads) vs synthetic, ResNet-50 amp train, SGD fused: 5,940 vs 6,000 img/s "
        "= 99.0% (data_wait 1.0%, GPU util 90% vs 90%; goal ≥ 97%).",
        "- [gpu] DALI-fed (GPU decode, 4 threads) vs synthetic, SSD300 amp train, SGD fused: 1,520 vs 1,600 img/s "
        "= 95.0% (data_wait 1.0%, GPU util 90% vs 90%).",
    ]  # fmt: skip


def test_dali_fed_tf_xla_pairs_with_the_synthetic_job_of_its_compiler(tmp_path):
    """A DALI-fed TF+XLA job is set against the XLA job on synthetic data, not the graph-mode one."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    for data, xla, tput in (
        ("synthetic", False, 900.0),
        ("synthetic", True, 7000.0),
        ("imagenet", True, 6000.0),
    ):
        config = {"framework": {"name": "tf", "xla": xla}, "model": {"name": "resnet50"}, "dataset": {"name": data}, "data": {"num_threads": 8}}  # fmt: skip
        metrics = {"throughput": tput, "loss_last": 3.0, "data_wait_frac": 0.5, "gpu_util_mean": 89.0}
        log_config(client, eid, f"tf-{data}-{xla}", config, metrics, {"run.optimizer": "sgd", "run.execution": "xla" if xla else "graph"})  # fmt: skip
    assert page_lines(tmp_path, db, "gpu") == [
        "- [gpu] DALI-fed (GPU decode, 8 threads) vs synthetic, TensorFlow ResNet-50 amp train, SGD, xla: "
        "6,000 vs 7,000 img/s = 85.7% (data_wait 50.0%, GPU util 89% vs 89%; goal ≥ 97%).",
    ]  # fmt: skip


def test_parity_table_shows_each_cell_once_with_a_column_per_run(tmp_path):
    """The by-cell table: one row per (model, mode, precision, compile, batch), one column per source that
    paired any job, the cell's ratios there; batches in tokens are cells of their own."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    log_job(client, eid, "ncf", "infer", "amp", 190.0e6, batch=1048576)
    log_job(client, eid, "transformer", "train", "amp", 130e3, optimizer="adam/fused", tokens=5120)
    log_job(client, eid, "transformer", "train", "amp", 530e3, optimizer="adam/fused", tokens=40960)
    bare = [
        {"model": "ncf", "mode": "infer", "precision": "amp", "compile": False, "optimizer": "fused",
         "batch": 1048576, "unit": "samples/s", "throughput": 200.0e6, "loss_finite": True},
        {"model": "transformer", "mode": "train", "precision": "amp", "compile": False, "optimizer": "fused",
         "batch_tokens": 5120, "unit": "target tokens/s", "throughput": 140e3, "loss_finite": True},
        {"model": "transformer", "mode": "train", "precision": "amp", "compile": False, "optimizer": "fused",
         "batch_tokens": 5120, "unit": "target tokens/s", "throughput": 125e3, "loss_finite": True},
    ]  # fmt: skip
    bare_file = tmp_path / "bare.jsonl"
    bare_file.write_text("".join("BARE " + json.dumps(b) + "\n" for b in bare))
    empty = tmp_path / "none.jsonl"  # run "u" has a yardstick file without a matching line: no column
    empty.write_text("")
    out = tmp_path / "page"
    sources = ["--source", "s", str(db), str(bare_file), "--source", "t", str(db), str(bare_file)]
    proc = make_page(out, *sources, "--source", "u", str(db), str(empty))
    assert proc.returncode == 0, proc.stderr
    md = out.with_suffix(".md").read_text().splitlines()
    at = md.index("## Harness vs yardstick by cell")
    assert md[at + 2 : at + 7] == [
        "| framework | model | mode | precision | compile | batch | s | t |",
        "|---|---|---|---|---|---|---|---|",
        "| PyTorch | NCF | infer | AMP | - | 1048576 | 95.0% | 95.0% |",
        "| PyTorch | Transformer | train | AMP | - | 5120 tokens | 92.9–104.0% | 92.9–104.0% |",
        "",  # the 40,960-token job had no yardstick line of its batch: no row
    ]


def test_tf_jobs_pair_only_with_tf_lines_of_the_same_compiler(tmp_path):
    """A TF job is judged against a TF yardstick line, graph against graph and XLA against XLA; never
    against a PyTorch line of the same model, mode and precision in the same file."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    for xla, tput in ((False, 900.0), (True, 7050.0)):
        config = {"framework": {"name": "tf", "xla": xla}, "model": {"name": "resnet50"}}
        metrics = {"throughput": tput, "loss_last": 2.0, "gpu_util_mean": 97.0}
        log_config(client, eid, f"tf-xla-{xla}", config, metrics, {"run.optimizer": "sgd", "run.execution": "xla" if xla else "graph"})  # fmt: skip
    log(client, eid, "synthetic", "fused", 6000.0, 2.0)  # PyTorch, eager
    lines = [
        {"framework": "tf", "xla": False, "compile": False, "optimizer": "sgd", "throughput": 905.0},
        {"framework": "tf", "xla": True, "compile": False, "optimizer": "sgd", "throughput": 7046.0},
        {"compile": False, "optimizer": "fused", "samples_per_s": 6100.0},  # a PyTorch yardstick line
    ]
    common = {"model": "resnet50", "mode": "train", "precision": "amp", "batch": 256, "unit": "img/s"}
    assert sorted(page_lines(tmp_path, db, "h", [common | b for b in lines], "harness")) == [
        "- [h] harness vs hand-written loop, PyTorch ResNet-50 AMP train, SGD fused: 6,000 vs 6,100 img/s = 98.4% (goal ≥ 99%).",
        "- [h] harness vs hand-written loop, TensorFlow ResNet-50 AMP train, SGD, XLA: 7,050 vs 7,046 img/s = 100.1% (goal ≥ 99%).",
        "- [h] harness vs hand-written loop, TensorFlow ResNet-50 AMP train, SGD, graph (no XLA): 900 vs 905 img/s = 99.4% (goal ≥ 99%).",
    ]  # fmt: skip
    with open(tmp_path / "page.csv", newline="") as f:
        cells = {(r["framework"], r["execution"], float(r["throughput"])) for r in csv.DictReader(f)}
    assert {("tf", "graph", 900.0), ("tf", "xla", 7050.0)} <= cells  # the mode a job ran in, as a column


def test_jax_jobs_pair_only_with_jax_lines_of_the_same_compiler(tmp_path):
    """A JAX job is judged against a JAX yardstick line, jitted against jitted and op by op against op by
    op (jax.jit is its compiler); never against a TF or PyTorch line of the same cell."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    for jit, tput in ((True, 6700.0), (False, 300.0)):
        config = {"framework": {"name": "jax", "jit": jit}, "model": {"name": "resnet50"}}
        metrics = {"throughput": tput, "loss_last": 2.0, "gpu_util_mean": 97.0}
        log_config(client, eid, f"jax-jit-{jit}", config, metrics, {"run.optimizer": "sgd/optax", "run.execution": "jit" if jit else "eager"})  # fmt: skip
    lines = [
        {"framework": "jax", "jit": True, "compile": True, "optimizer": "optax", "throughput": 6680.0},
        {"framework": "jax", "jit": False, "compile": False, "optimizer": "optax", "throughput": 310.0},
        {"framework": "tf", "xla": True, "compile": False, "optimizer": "sgd", "throughput": 7046.0},
    ]
    common = {"model": "resnet50", "mode": "train", "precision": "amp", "batch": 256, "unit": "img/s"}
    assert sorted(page_lines(tmp_path, db, "h", [common | b for b in lines], "harness")) == [
        "- [h] harness vs hand-written loop, JAX ResNet-50 AMP train, SGD optax, PRNG rbg: 300 vs 310 img/s = 96.8% (goal ≥ 99%).",
        "- [h] harness vs hand-written loop, JAX ResNet-50 AMP train, SGD optax, jax.jit, PRNG rbg: 6,700 vs 6,680 img/s = 100.3% (goal ≥ 99%).",
    ]  # fmt: skip
    with open(tmp_path / "page.csv", newline="") as f:
        cells = {(r["framework"], r["execution"], r["compile"]) for r in csv.DictReader(f)}
    assert {("jax", "jit", "jit"), ("jax", "eager", "-")} <= cells


def test_a_jax_training_line_of_another_prng_is_no_yardstick(tmp_path):
    """A JAX Transformer job that recorded its PRNG (run.prng: its dropout masks' generator) pairs with the
    lines of that generator only; a line or a job from before either recorded one still pairs."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    model = {"name": "transformer", "task": "translation", "batch_tokens": 40960}
    for name, tput, tags in (("rbg", 322e3, {"run.prng": "rbg"}), ("unknown", 321e3, {})):
        config = {"framework": {"name": "jax"}, "model": model, "precision": {"name": "tf32"}}
        metrics = {"throughput": tput, "loss_last": 10.0}
        drop = () if tags else ("framework.prng",)
        log_config(client, eid, name, config, metrics, {"run.optimizer": "adam/optax", **tags}, drop=drop)
    common = {"framework": "jax", "jit": True, "compile": True, "optimizer": "optax", "model": "transformer",
              "mode": "train", "precision": "tf32", "batch_tokens": 40960, "unit": "target tokens/s"}  # fmt: skip
    lines = [
        common | {"prng": "threefry2x32", "throughput": 328e3},
        common | {"prng": "rbg", "throughput": 320e3},
    ]
    assert sorted(page_lines(tmp_path, db, "p", lines, "harness")) == [
        "- [p] harness vs hand-written loop, JAX Transformer TF32 train, Adam optax, jax.jit, PRNG rbg: 322,000 vs 320,000 target tokens/s = 100.6% (goal ≥ 99%).",
        "- [p] harness vs hand-written loop, JAX Transformer TF32 train, Adam optax, jax.jit: 321,000 vs 320,000–328,000 target tokens/s = 97.9–100.3% (goal ≥ 99%).",
    ]  # fmt: skip


def test_jobs_that_differ_only_in_their_prng_are_told_apart(tmp_path):
    """Two JAX training jobs of one cell, one per generator (framework.prng; the second from its setting
    alone, no run.prng tag): the CSV's prng column, the ratio lines and a prng column of the by-cell table
    name each, and each pairs only with the loop of its own generator."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    model = {"name": "transformer", "task": "translation", "batch_tokens": 40960}
    for prng, tput, tags in (("threefry2x32", 324e3, {"run.prng": "threefry2x32"}), ("rbg", 318e3, {})):
        config = {"framework": {"name": "jax", "prng": prng}, "model": model, "precision": {"name": "tf32"}}
        metrics = {"throughput": tput, "loss_last": 10.0}
        log_config(client, eid, prng, config, metrics, {"run.optimizer": "adam/optax", **tags})
    common = {"framework": "jax", "jit": True, "compile": True, "optimizer": "optax", "model": "transformer",
              "mode": "train", "precision": "tf32", "batch_tokens": 40960, "unit": "target tokens/s"}  # fmt: skip
    lines = [common | {"prng": "threefry2x32", "throughput": 323e3}]
    assert page_lines(tmp_path, db, "g", lines, "harness") == [
        "- [g] harness vs hand-written loop, JAX Transformer TF32 train, Adam optax, jax.jit, PRNG threefry2x32: 324,000 vs 323,000 target tokens/s = 100.3% (goal ≥ 99%).",
    ]  # fmt: skip
    with open(tmp_path / "page.csv", newline="") as f:
        assert sorted((r["prng"], r["throughput"]) for r in csv.DictReader(f)) == [
            ("rbg", "318000.0"),
            ("threefry2x32", "324000.0"),
        ]
    md = (tmp_path / "page.md").read_text().splitlines()
    at = md.index("## Harness vs yardstick by cell")
    assert md[at + 2 : at + 5] == [
        "| framework | model | mode | precision | compile | prng | batch | g |",
        "|---|---|---|---|---|---|---|---|",
        "| JAX | Transformer | train | TF32 | jit | threefry2x32 | 40960 tokens | 100.3% |",
    ]


def test_serve_jobs_get_a_loadgen_table_with_their_percentiles_and_verdict(tmp_path):
    """A finished mode=serve job is one line of the serving table, with the figures LoadGen's summary gave
    (as serving/record.py logs them); a failed one and the training jobs are not in it."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    log(client, eid, "synthetic", "fused", 7000.0, 2.0)
    figures = {"latency_p50_ms": 4.17, "latency_p90_ms": 4.39, "latency_p99_ms": 4.95, "latency_max_ms": 7.55}
    for status, scenario in (("FINISHED", "SingleStream"), ("FAILED", "Offline")):
        job = JobConfig.from_dict(
            {"framework": {"name": "jax"}, "precision": {"name": "amp"}, "mode": "serve"}
        )
        job.device = "cuda"
        run = RunLogger.create(client, eid, f"serve-{scenario}", None, {"dlbench.kind": "job"})
        run.params(flatten(job.to_dict()) | {"batch_size": 8})
        if status == "FINISHED":
            run.metrics({**figures, "qps": 246.0, "serve_batch_mean": 1.0})
            run.tags({"serve.valid": "VALID", "serve.scenario": scenario, "run.execution": "jit"})
        run.finish(status)
    out = tmp_path / "page"
    proc = make_page(out, "--source", "h", str(db))
    assert proc.returncode == 0, proc.stderr
    md = out.with_suffix(".md").read_text().splitlines()
    table = md[md.index("## Serving (MLPerf LoadGen)") + 4 :]
    assert table[0] == "| h | jax | jit | resnet50 | amp | SingleStream | 8 | VALID | 4.17 | 4.39 | 4.95 | 7.55 | 246.0 queries/s | 1.00 |"  # fmt: skip
    assert table[1] == ""  # the failed job is not a line of it


def test_jax_ssd300_and_transformer_lines_pair_with_their_jax_jobs(tmp_path):
    """bare_jax_ssd300.py and bare_jax_transformer.py lines (their keys as the scripts print them: "jit",
    "compile", "optimizer": "optax", "batch" in images, "batch_tokens" in tokens) pair with dlbench's
    framework=jax jobs of model=ssd300 / model=transformer (run.optimizer sgd/optax, adam/optax), decoding
    included."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    jobs = [
        ("ssd300", "train", 1800.0, "sgd/optax", {}),
        ("ssd300", "infer", 5200.0, None, {}),
        ("transformer", "train", 450e3, "adam/optax", {"task": "translation", "batch_tokens": 40960}),
        ("transformer", "infer", 30e3, None, {"task": "translation", "batch_tokens": 5120}),
    ]
    for model, mode, tput, optimizer, task in jobs:
        config = {"framework": {"name": "jax", "jit": True}, "model": {"name": model, **task}, "mode": mode}
        tags = {"run.execution": "jit", **({"run.optimizer": optimizer} if optimizer else {})}
        log_config(
            client,
            eid,
            f"jax-{model}-{mode}",
            config,
            {"throughput": tput, "loss_last": 2.0},
            tags,
            batch=128,
        )
    jax_line = {"framework": "jax", "jit": True, "compile": True, "optimizer": "optax", "precision": "amp"}
    lines = [
        {"model": "ssd300", "mode": "train", "batch": 128, "unit": "img/s", "throughput": 1810.0},
        {"model": "ssd300", "mode": "infer", "batch": 128, "unit": "img/s", "throughput": 5150.0},
        {"model": "transformer", "mode": "train", "batch_tokens": 40960, "unit": "target tokens/s",
         "throughput": 455e3, "cache": "fixed"},
        {"model": "transformer", "mode": "infer", "batch_tokens": 5120, "unit": "generated tokens/s",
         "throughput": 29.5e3, "cache": "fixed"},
        {"model": "transformer", "mode": "train", "batch_tokens": 5120, "unit": "target tokens/s",
         "throughput": 99e3},  # another batch: no job of its configuration
    ]  # fmt: skip
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join("BARE " + json.dumps(jax_line | b | {"loss_finite": True}) + "\n" for b in lines))
    out = tmp_path / "page"
    proc = make_page(out, "--source", "j", str(db), str(bare))
    assert proc.returncode == 0, proc.stderr
    md = out.with_suffix(".md").read_text().splitlines()
    assert sorted(line for line in md if line.startswith("- [j] harness")) == [
        "- [j] harness vs hand-written loop, JAX SSD300 AMP infer, jax.jit: 5,200 vs 5,150 img/s = 101.0% (goal ≥ 99%).",
        "- [j] harness vs hand-written loop, JAX SSD300 AMP train, SGD optax, jax.jit, PRNG rbg: 1,800 vs 1,810 img/s = 99.4% (goal ≥ 99%).",
        "- [j] harness vs hand-written loop, JAX Transformer AMP infer, jax.jit: 30,000 vs 29,500 generated tokens/s = 101.7% (goal ≥ 99%).",
        "- [j] harness vs hand-written loop, JAX Transformer AMP train, Adam optax, jax.jit, PRNG rbg: 450,000 vs 455,000 target tokens/s = 98.9% (goal ≥ 99%).",
    ]  # fmt: skip


def test_decoding_in_one_call_pairs_only_with_a_yardstick_that_decodes_in_one_call(tmp_path):
    """A TF+XLA decoding job with model.decode_loop=device is judged against a `--loop device` line, and the
    host-loop job against a host-loop line (a line without `loop`, as the scripts printed before, is one)."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    for loop, tput in (("host", 300e3), ("device", 500e3)):
        model = {"name": "transformer", "task": "translation", "batch_tokens": 40960, "decode_loop": loop}
        config = {"framework": {"name": "tf", "xla": True}, "mode": "infer", "model": model}
        log_config(client, eid, f"tf-{loop}", config, {"throughput": tput, "loss_last": 0.0}, {"run.execution": "xla"}, batch=640)  # fmt: skip
    line = {"framework": "tf", "xla": True, "compile": False, "optimizer": "adam", "precision": "amp",
            "model": "transformer", "mode": "infer", "batch_tokens": 40960, "unit": "generated tokens/s"}  # fmt: skip
    bare = [line | {"throughput": 305e3}, line | {"throughput": 495e3, "loop": "device"}]
    assert sorted(page_lines(tmp_path, db, "d", bare, "harness")) == [
        "- [d] harness vs hand-written loop, TensorFlow Transformer AMP infer, XLA, every position in one call: 500,000 vs 495,000 generated tokens/s = 101.0% (goal ≥ 99%).",
        "- [d] harness vs hand-written loop, TensorFlow Transformer AMP infer, XLA: 300,000 vs 305,000 generated tokens/s = 98.4% (goal ≥ 99%).",
    ]  # fmt: skip


def test_versions_are_listed_per_framework_and_the_gpu_once(tmp_path):
    """TensorFlow's CUDA 12 and PyTorch's CUDA 13 on one machine: each framework's line names its own."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    gpu = {"gpu.gpu0_name": "NVIDIA H200", "gpu.driver": "580.1"}
    for framework, cuda in (("tf", "12.5.1"), ("torch", "13.0"), ("torch", "13.0")):
        job = JobConfig.from_dict({"framework": {"name": framework}, "model": {"name": "resnet50"}})
        job.device = "cuda"
        run = RunLogger.create(client, eid, framework, None, {"dlbench.kind": "job"})
        run.params(flatten(job.to_dict()) | {"batch_size": 256})
        run.metrics({"throughput": 1000.0, "loss_last": 2.0})
        run.tags(
            gpu | {"version.cuda": cuda, f"version.{'tensorflow' if framework == 'tf' else 'torch'}": "2"}
        )
        run.finish("FINISHED")
    out = tmp_path / "page"
    proc = make_page(out, "--source", "h", str(db))
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in out.with_suffix(".md").read_text().splitlines() if x.startswith("Versions:"))
    assert line == (
        "Versions: gpu.driver 580.1, gpu.gpu0_name NVIDIA H200; tf: version.cuda 12.5.1, version.tensorflow 2; "
        "torch: version.cuda 13.0, version.torch 2"
    )


def test_a_killed_job_of_another_framework_shows_no_torch_optimizer(tmp_path):
    """A training job stopped before it reported its optimizer shows its setting only where the setting is
    PyTorch's (framework.optimizer_impl); a killed TF job's optimizer is unknown, never torch's `foreach`."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    for framework in ("tf", "torch"):
        job = JobConfig.from_dict({"framework": {"name": framework}, "model": {"name": "ssd300"}, "precision": {"name": "tf32"}, "mode": "train", "device": "cuda"})  # fmt: skip
        params = flatten(job.to_dict()) | {"batch_size": 128}
        if framework == "tf":
            params = {k: v for k, v in params.items() if k != "framework.optimizer_impl"}
        run = RunLogger.create(client, eid, f"{framework}-killed", None, {"dlbench.kind": "job"})
        run.params(params)
        run.finish("KILLED")
    page_lines(tmp_path, db, "k")
    with open(tmp_path / "page.csv", newline="") as f:
        rows = {(r["framework"], r["status"], r["optimizer"]) for r in csv.DictReader(f)}
    assert rows == {("tf", "KILLED", "–"), ("torch", "KILLED", "fused")}


def test_tf32_column_reads_each_frameworks_own_flag(tmp_path):
    """The tf32 column is what each framework reported: PyTorch's cuDNN flag, TF's one switch, JAX's matmul
    precision; none of them is left blank for want of PyTorch's tag name."""
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    flags = {"torch": "precision.tf32_cudnn", "tf": "precision.tf32", "jax": "precision.tf32_matmul"}
    for framework, tag in flags.items():
        config = {
            "framework": {"name": framework},
            "model": {"name": "resnet50"},
            "precision": {"name": "tf32"},
        }
        metrics = {"throughput": 3000.0, "loss_last": 2.0}
        log_config(
            client, eid, framework, config, metrics, {"run.optimizer": "sgd", tag: str(framework != "jax")}
        )
    page_lines(tmp_path, db, "t")
    with open(tmp_path / "page.csv", newline="") as f:
        rows = {(r["framework"], r["tf32"]) for r in csv.DictReader(f)}
    assert rows == {("torch", "True"), ("tf", "True"), ("jax", "False")}
