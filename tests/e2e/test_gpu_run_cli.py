"""scripts/tools/gpu_run.sh, the command behind the results pages, run on the CPU: its sweep lands in OUT's
store, and a --yardstick command (any yardstick, with its own interpreter) runs before and after it, its
BARE lines in OUT/bare.jsonl for yardsticks/page.py to pair with the sweep's jobs."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_a_tf_yardstick_brackets_the_sweep_in_one_command(tmp_path):
    # find_spec, not importorskip: TensorFlow imported into the test process makes a later import of
    # triton (through torch) crash it
    out = tmp_path / "out"
    yardstick = (
        f"{sys.executable} yardsticks/bare_tf_ncf.py --device cpu --warmup 1 --steps 2 --windows 2 "
        "--batch 320 --users 64 --items 128 --precision fp32 --mode train"
    )
    sweep = ["framework=tf", "model=ncf", "precision=fp32", "+experiment=smoke", "report.enabled=false"]
    env = {**os.environ, "PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        ["bash", "scripts/tools/gpu_run.sh", str(out), "--yardstick", yardstick, "--", *sweep],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    lines = [json.loads(s.removeprefix("BARE ")) for s in (out / "bare.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(
        r["framework"] == "tf" and r["batch"] == 320 for r in lines
    )  # before, after
    with sqlite3.connect(out / "mlflow.db") as db:
        runs = db.execute("select status from runs where lifecycle_stage = 'active'").fetchall()
    assert ("FINISHED",) in runs and ("FAILED",) not in runs
    assert (out / "sweep0.log").stat().st_size > 0
