"""SSD300 through the real CLI on a generated COCO-format set: DALI's COCO pipeline feeds all three
frameworks, and every run finishes with images/s, the verified precision and the same network."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

SSD300_PARAMS = "22894902"


def test_ssd300_on_generated_coco_in_every_framework(cli, tmp_path):
    data = tmp_path / "coco"
    made = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "datasets" / "make_coco_dataset.py"), "--out", str(data),
         "--train", "6", "--val", "3", "--seed", "1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    overrides = [
        "framework=tf,torch,mxnet", "model=ssd300", "+experiment=smoke",
        "dataset=coco2017", f"dataset.path={data}", "data.num_threads=1",
    ]  # fmt: skip
    res = cli.run(overrides, timeout=1500, OMP_NUM_THREADS="1")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    runs = [r for r in cli.runs() if r.data.tags.get("dlbench.kind") != "sweep"]
    assert sorted(r.data.params["framework.name"] for r in runs) == ["mxnet", "tf", "torch"]
    for run in runs:
        p, m, tags = run.data.params, run.data.metrics, run.data.tags
        assert run.info.status == "FINISHED", tags.get("failure")
        assert p["throughput_unit"] == "images" and m["throughput"] > 0
        assert p["model.params"] == SSD300_PARAMS
        assert p["dataset.resolved_format"] == "coco" and p["dataset.split"] == "train2017"
        assert tags["run.task"] == "detection" and tags["precision.compute_dtype"] == "float32"
        assert math.isfinite(m["loss_last"]) and m["loss_last"] > 0


def test_a_negative_width_box_is_refused_before_training(cli, tmp_path):
    """DALI's reader would take the box and SSD would train on a NaN target; the CLI names it instead."""
    import json

    data = tmp_path / "coco"
    made = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "datasets" / "make_coco_dataset.py"), "--out", str(data),
         "--train", "4", "--val", "2", "--seed", "1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    ann = data / "annotations" / "instances_train2017.json"
    coco = json.loads(ann.read_text())
    coco["annotations"][1]["bbox"][2] = -4.0
    ann.write_text(json.dumps(coco))
    res = cli.run(["model=ssd300", "+experiment=smoke", "dataset=coco2017", f"dataset.path={data}"])
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "Traceback" not in out
    (line,) = [x for x in out.splitlines() if "config error" in x]
    assert f"COCO annotations {ann}: image" in line and "width -4 is not positive" in line
    assert "data.skip_bad_boxes=true" in line
    if cli.db.exists() and cli.client().get_experiment_by_name("dlbench") is not None:
        assert not [r for r in cli.runs() if "framework.name" in r.data.params]  # no job run was made
