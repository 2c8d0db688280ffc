"""scripts/tools/tf_transformer_ab.py on the CPU at a tiny size: every variant (the yardstick's network and
dlbench's, crossed with both losses) trains in one process and gets a rate per round, the ratios are to the
yardstick's, and an unknown variant is refused in one line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed in this interpreter", allow_module_level=True)

pytestmark = pytest.mark.slow
TOOL = Path(__file__).resolve().parents[2] / "scripts" / "tools" / "tf_transformer_ab.py"
TINY = [
    "--device",
    "cpu",
    "--size",
    "tiny",
    "--sentences",
    "4",
    "--length",
    "8",
    "--rounds",
    "2",
    "--steps",
    "2",
]


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, env=env, timeout=600
    )  # fmt: skip


def test_every_variant_is_timed_against_the_yardstick() -> None:
    done = run(*TINY, "--warmup", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    rounds = [json.loads(s[6:]) for s in done.stdout.splitlines() if s.startswith("ROUND ")]
    ab = json.loads(next(s[3:] for s in done.stdout.splitlines() if s.startswith("AB ")))
    assert [r["round"] for r in rounds] == [0, 1]
    assert set(ab["median"]) == {"Y", "D", "DY", "YD"}
    assert all(len(v) == 2 and min(v) > 0 for v in ab["rates"].values())
    assert ab["target_tokens"] == 4 * 8  # every sentence fills its length: no padding labels
    assert ab["ratio_to_Y"]["Y"] == 1.0
    assert ab["ratio_to_Y"]["D"] == pytest.approx(ab["median"]["D"] / ab["median"]["Y"])


def test_an_unknown_variant_is_refused_in_one_line() -> None:
    done = run(*TINY, "--variants", "Y,Q")
    assert done.returncode == 2
    assert "--variants: unknown ['Q']" in done.stderr and "Traceback" not in done.stderr
