"""SSD300's accuracy mode through the real CLI: mode=converge on a generated COCO set held in memory
(dataset=coco_memory) trains, scores the held-out split with COCO mAP@0.5 and mAP after every epoch and
records both per epoch in MLflow. Tiny (32x32 input, 8 training images, one framework): it checks the
wiring, not how well SSD learns (+experiment=accuracy_ssd does that, in minutes)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_converge_logs_map50_and_map_every_epoch(cli, tmp_path):
    data = tmp_path / "coco"
    made = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "datasets" / "make_coco_dataset.py"), "--out", str(data),
         "--train", "8", "--val", "4", "--objects", "shapes", "--classes", "2", "--max-objects", "1",
         "--object-size", "0.4", "0.8", "--plain"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    overrides = [
        "framework=torch", "model=ssd300", "model.image_size=32", "model.num_classes=3",
        "dataset=coco_memory", f"dataset.path={data}", "mode=converge", "schedule.batch_size=4",
        "schedule.epochs=2", "schedule.seeds=[1]", "data.hflip=true", "threads=1", "telemetry.interval_s=0.5",
    ]  # fmt: skip
    res = cli.run(overrides, timeout=900, OMP_NUM_THREADS="1")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    runs = [r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"]
    assert len(runs) == 1
    run = runs[0]
    m, tags, p = run.data.metrics, run.data.tags, run.data.params
    assert run.info.status == "FINISHED", tags.get("failure")
    assert tags["dlbench.eval_metric"] == "map50" and "dlbench.eval_flag" not in tags
    assert p["dataset.resolved_format"] == "coco_memory" and p["dataset.found_samples"] == "8"
    assert tags["run.default_boxes"] == "108" and tags["run.augmentation"].startswith("hflip")
    client = cli.client()
    last = {}
    for name in ("eval/map50", "eval/map"):
        history = sorted(client.get_metric_history(run.info.run_id, name), key=lambda h: h.step)
        assert [h.step for h in history] == [1, 2], name
        assert all(math.isfinite(h.value) and 0.0 <= h.value <= 1.0 for h in history), name
        last[name] = history[-1].value
    assert m["eval_final"] == pytest.approx(last["eval/map50"]) and last["eval/map"] <= last["eval/map50"]
    assert m["epochs_done"] == 2 and m["throughput"] > 0
