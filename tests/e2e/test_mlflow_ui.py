"""The MLflow UI, in a real headless Chromium against a real `mlflow server`, shows a sweep the way a
model-training user expects: the link dlbench gives (`ui_url`) opens the experiment's runs table with the
sweep in it; the link a sweep ends with (its view, `share_sweep_view`) shows only its jobs, fastest first,
with the result columns; a run's link opens that run. A plain experiment link opens MLflow 3.17's GenAI
traces overview instead ("Traces 0"), whatever the experiment's kind tag says: that is why dlbench gives
links."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlbench.tracking.run_logger import RunLogger
from dlbench.tracking.store import open_store
from dlbench.tracking.ui_records import KIND_TAG, MODEL_TRAINING, share_sweep_view, ui_url
from tests.chromium import chromium, needs_chromium
from tests.mlflow_server import mlflow_server

pytestmark = [pytest.mark.slow, needs_chromium]
BUDGET = "--virtual-time-budget=30000"  # let the single-page app fetch and render (virtual ms)
WINDOW = "--window-size=1900,1000"  # the grid renders only the columns in view
SWEEP = "sweep 2026-11-30 12:00:00"


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A server whose dlbench experiment holds one sweep: a parent and two finished jobs."""
    tmp = tmp_path_factory.mktemp("ui")
    with mlflow_server(tmp) as srv:
        client, eid = open_store(srv["url"], "dlbench")
        parent = RunLogger.create(client, eid, SWEEP, tags={"dlbench.kind": "sweep"})
        for precision, tput in (("fp32", 100.0), ("amp", 210.0)):
            job = RunLogger.create(
                client, eid, f"torch-resnet50-{precision}-train", parent.run_id, {"dlbench.kind": "job"}
            )
            job.params({"framework.name": "torch", "precision.name": precision})
            job.metrics({"throughput": tput})
            job.finish("FINISHED")
        parent.finish("FINISHED")
        yield srv | {"experiment_id": eid, "parent": parent.run_id, "client": client}


def page_text(dom: str) -> str:
    """The visible text of a dumped DOM, one ' | ' between elements."""
    dom = re.sub(r"<(script|style)\b.*?</\1>", "", dom, flags=re.S)
    text = re.sub(r"(\s*\|\s*)+", " | ", re.sub(r"<[^>]+>", " | ", dom))
    return html.unescape(text)


def shows_runs_table(text: str) -> bool:
    return "Runs - Experiment" in text and "| Run Name |" in text and f"| {SWEEP} |" in text


def open_page(tmp_path: Path, url: str) -> str:
    proc = chromium(tmp_path, BUDGET, WINDOW, "--dump-dom", url, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return page_text(proc.stdout)


def test_the_sweep_link_opens_the_runs_table(ui: dict, tmp_path: Path):
    eid = ui["experiment_id"]
    assert ui["client"].get_experiment(eid).tags[KIND_TAG] == MODEL_TRAINING
    text = open_page(tmp_path, ui_url(ui["url"], eid))
    assert shows_runs_table(text), text[:3000]
    assert "| 3 | matching runs |" in text  # the sweep's parent and its two jobs
    assert "Token Usage" not in text  # not the GenAI overview


def test_the_sweep_view_link_shows_its_jobs_fastest_first_with_the_result_columns(ui: dict, tmp_path: Path):
    key = share_sweep_view(ui["client"], ui["experiment_id"], ui["parent"])  # what dlbench's sweep writes
    text = open_page(tmp_path, ui_url(ui["url"], ui["experiment_id"], view_key=key))
    assert "You're viewing a shared view" in text, text[:3000]  # the UI found and loaded the view
    assert "| 2 | matching runs |" in text and f"| {SWEEP} |" not in text  # the jobs, not the parent
    for column in ("throughput", "framework.name", "precision.name"):
        assert f"| {column} |" in text, text[:3000]
    assert text.index("torch-resnet50-amp-train") < text.index("torch-resnet50-fp32-train")  # 210 over 100


def test_a_plain_experiment_link_opens_the_genai_overview(ui: dict, tmp_path: Path):
    text = open_page(tmp_path, f"{ui['url']}/#/experiments/{ui['experiment_id']}")
    assert not shows_runs_table(text)  # the check above tells the two pages apart
    assert "| Traces | 0 |" in text, text[:3000]


def test_a_run_link_opens_the_run(ui: dict, tmp_path: Path):
    text = open_page(tmp_path, ui_url(ui["url"], ui["experiment_id"], ui["parent"]))
    assert f"{SWEEP} - MLflow Run" in text or f"| {SWEEP} |" in text, text[:3000]
    assert ui["parent"] in text
