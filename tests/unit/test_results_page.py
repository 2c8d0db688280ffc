"""`python src/report.py page` (dlbench.report.page) on a real sqlite MLflow store: ratios stay inside one run and one optimizer,
and a job whose loss went NaN is listed as diverged and never enters a ratio."""

from __future__ import annotations

import json
import subprocess
import sys

from dlbench.config import JobConfig
from dlbench.report.page import digest
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import open_store
from tests.conftest import ROOT


def log(client, eid: str, data: str, optimizer: str, throughput: float, loss: float) -> None:
    job = JobConfig.from_dict({"model": {"name": "resnet50"}, "precision": {"name": "amp"}, "mode": "train"})
    job.dataset.name, job.device, job.framework.optimizer_impl = data, "cuda", optimizer
    run = RunLogger.create(client, eid, f"{data}-{optimizer}", None, {"dlbench.kind": "job"})
    run.params(flatten(job.to_dict()) | {"batch_size": 256})
    run.metrics({"throughput": throughput, "loss_last": loss, "data_wait_frac": 0.01, "gpu_util_mean": 90.0})
    run.tags({"precision.optimizer": f"sgd/{optimizer}"})
    run.finish("FINISHED")


def test_page_ratios_skip_diverged_jobs_and_other_optimizers(tmp_path):
    db = tmp_path / "mlflow.db"
    client, eid = open_store(f"sqlite:///{db}", "dlbench")
    log(client, eid, "synthetic", "fused", 6000.0, float("nan"))  # diverged: fast, and meaningless
    log(client, eid, "synthetic", "foreach", 5000.0, 3.0)
    log(client, eid, "imagenet", "foreach", 4500.0, 3.1)
    log(client, eid, "imagenet", "fused", 5900.0, float("nan"))
    bare = tmp_path / "bare.jsonl"
    rows = [("foreach", 5050.0), ("fused", 6100.0)]
    bare.write_text("".join(
        "BARE " + json.dumps({"precision": "amp", "compile": False, "optimizer": o, "samples_per_s": s}) + "\n"
        for o, s in rows
    ))  # fmt: skip
    out = tmp_path / "page"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "src/report.py"), "page", "--source", "gpu", str(db), str(bare), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    md = out.with_suffix(".md").read_text()
    ratios = [line for line in md.splitlines() if line.startswith("- [gpu]")]
    assert ratios == [
        "- [gpu] harness vs hand-written loop, ResNet-50 AMP train, SGD foreach: 5,000 vs 5,050 img/s = 99.0% (goal ≥ 99%).",
        "- [gpu] DALI-fed vs synthetic, ResNet-50 amp train, SGD foreach: 4,500 vs 5,000 img/s = 90.0% "
        "(data_wait 1.0%, GPU util 90% vs 90%; goal ≥ 97%).",
    ]  # fmt: skip
    assert md.count("FINISHED, diverged") == 2
    # provenance: which data made the page
    assert "## Provenance" in md and f"- Source gpu: mlflow.db sha256 {digest(db)} (4 jobs)" in md
