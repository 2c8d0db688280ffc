"""A real `mlflow server` (sqlite backend, proxied artifacts) serves what dlbench logs through it:
job runs under a sweep parent, a 50-point `gpu0/util` history, and the sweep's report (built over the
server's REST API, then logged through it as artifacts of the parent run)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from dlbench.config import JobConfig
from dlbench.report import build_report
from dlbench.tracking.run_logger import RunLogger, flatten
from dlbench.tracking.store import open_store
from tests.mlflow_server import mlflow_server

pytestmark = pytest.mark.slow  # server start-up alone takes 10-30 s on a small machine

POINTS = 50


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict]:
    with mlflow_server(tmp_path) as srv:
        yield srv


def log_job(
    client, eid: str, parent: str, precision: str, tput: tuple[float, float, float], series=None
) -> str:
    job = JobConfig.from_dict(
        {"framework": {"name": "torch"}, "model": {"name": "resnet50"}, "precision": {"name": precision}}
    )
    run = RunLogger.create(client, eid, f"torch-resnet50-{precision}-train", parent, {"dlbench.kind": "job"})
    run.params(flatten(job.to_dict()) | {"batch_size": job.batch_size})
    run.metrics(
        {"throughput_p05": tput[0], "throughput": tput[1], "throughput_p95": tput[2], "gpu_util_mean": 88.0}
    )
    if series:
        run.series(series)
    run.finish("FINISHED")
    return run.run_id


def test_server_serves_runs_history_and_report(server: dict, tmp_path: Path):
    url = server["url"]
    client, eid = open_store(url, "dlbench")
    parent = RunLogger.create(client, eid, "sweep", tags={"dlbench.kind": "sweep"})
    t0 = time.time()
    util = [{"t": t0 + 0.1 * i, "gpu0/util": float(2 * i)} for i in range(POINTS)]
    fp32 = log_job(client, eid, parent.run_id, "fp32", (95, 100, 105), util)
    log_job(client, eid, parent.run_id, "amp", (190, 200, 210))
    report = build_report(client, url, tmp_path / "report", run_id=parent.run_id)  # read over REST
    for path in report.files:
        parent.artifact(path, "report")
    parent.finish("FINISHED")

    api = f"{url}/api/2.0/mlflow"
    found = requests.post(
        f"{api}/runs/search",
        json={"experiment_ids": [eid], "filter": f"tags.`mlflow.parentRunId` = '{parent.run_id}'"},
        timeout=30,
    ).json()["runs"]
    assert len(found) == 2
    metrics = {
        m["key"]: m["value"] for r in found for m in r["data"]["metrics"] if r["info"]["run_id"] == fp32
    }
    assert metrics["throughput"] == 100.0

    history = requests.get(
        f"{api}/metrics/get-history", params={"run_id": fp32, "metric_key": "gpu0/util"}, timeout=30
    ).json()["metrics"]
    assert len(history) == POINTS
    assert sorted(p["value"] for p in history) == [float(2 * i) for i in range(POINTS)]

    listed = requests.get(
        f"{api}/artifacts/list", params={"run_id": parent.run_id, "path": "report"}, timeout=30
    ).json()["files"]
    names = {f["path"] for f in listed}
    assert {"report/report.html", "report/report.md", "report/throughput-resnet50-train.png"} <= names

    page = requests.get(
        f"{url}/get-artifact", params={"run_id": parent.run_id, "path": "report/report.html"}, timeout=30
    )
    assert page.status_code == 200
    html = page.content.decode("utf-8")  # served without a charset: requests would guess latin-1
    assert '<table id="table-resnet50-train" class="dlbench-table results">' in html
    assert "mixed precision (amp) speeds up torch on resnet50 train by 2.00×." in html
    # the upload went through the server into its artifact destination, not to a client-side path
    assert list(server["art"].rglob("report.html"))
