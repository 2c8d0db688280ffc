"""report.html renders in a real headless Chromium: the page is not blank, its charts (base64 PNGs)
are painted, and its tables are real DOM tables with their ids."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dlbench.config import JobConfig
from dlbench.report import build_report
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import open_store
from tests.chromium import chromium, needs_chromium

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep of two frameworks x two precisions plus one failed job, reported to HTML."""
    tmp = tmp_path_factory.mktemp("html")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    parent = RunLogger.create(client, eid, "sweep", tags={"dlbench.kind": "sweep"})
    t0 = time.time()
    for fw, precision, mid, status in (
        ("tf", "fp32", 80, "FINISHED"),
        ("torch", "fp32", 100, "FINISHED"),
        ("tf", "amp", 170, "FINISHED"),
        ("torch", "amp", 210, "FINISHED"),
        ("mxnet", "fp32", 0, "FAILED"),
    ):
        job = JobConfig.from_dict({"framework": {"name": fw}, "precision": {"name": precision}})
        run = RunLogger.create(
            client, eid, f"{fw}-resnet50-{precision}-train", parent.run_id, {"dlbench.kind": "job"}
        )
        run.params(flatten(job.to_dict()) | {"batch_size": job.batch_size})
        if status == "FINISHED":
            run.metrics({"throughput_p05": 0.95 * mid, "throughput": mid, "throughput_p95": 1.05 * mid})
            run.metrics({"gpu_util_mean": 90, "gpu_mem_used_mib_max": 9000, "framework_mem_mib_max": 7000})
            run.series([{"t": t0 + 0.1 * i, "gpu0/util": min(95.0, 10.0 * i)} for i in range(40)])
        else:
            run.tags({"failure": "oom", "failure.message": "MXNetError: out of memory"})
        run.finish(status)
    parent.finish("FAILED")
    return build_report(client, uri, tmp / "report", run_id=parent.run_id).html


def test_report_renders_with_its_charts(report_html: Path, tmp_path: Path):
    shot = tmp_path / "shot.png"
    proc = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2400", report_html.as_uri())
    assert shot.is_file(), proc.stderr[-2000:]
    img = Image.open(shot).convert("RGB")
    assert img.size == (1200, 2400)  # tall enough to hold the first charts
    px = np.asarray(img, dtype=np.int16)
    non_white = (px.min(axis=2) < 240).mean()
    assert non_white > 0.01  # text and tables were painted
    colored = (px.max(axis=2) - px.min(axis=2) > 80).mean()
    assert colored > 0.002  # chart bars: only the embedded PNGs have saturated colors


def test_report_tables_are_in_the_dom(report_html: Path, tmp_path: Path):
    proc = chromium(tmp_path, "--dump-dom", report_html.as_uri())
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '<table id="table-resnet50-train" class="dlbench-table results">' in dom
    assert '<table id="glance-resnet50-train" class="dlbench-table glance">' in dom
    assert '<table id="failed-runs" class="dlbench-table failed">' in dom
    assert dom.count("<tr>") >= 1 + 4 + 1 + 1  # header + 4 results, header + 1 failure
    assert "torch is 25% faster than tf" in dom  # fp32: 95-105 vs 76-84
    assert dom.count('src="data:image/png;base64,') >= 4  # throughput, memory, utilization, speed-up
