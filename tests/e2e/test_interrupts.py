"""Ctrl-C at any moment of a sweep through the real CLI: exit 130, no RUNNING run, no process left.

The moments are the sweep's stages (the store being made, a run just made, the worker warming up, the
first job's run being closed, the second job running); scripts/tools/interrupt_sweeps.py draws many
random ones."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
_spec = importlib.util.spec_from_file_location("interrupt_sweeps", ROOT / "scripts/tools/interrupt_sweeps.py")
interrupt_sweeps = sys.modules["interrupt_sweeps"] = importlib.util.module_from_spec(_spec)  # dataclasses
_spec.loader.exec_module(interrupt_sweeps)


@pytest.mark.parametrize(
    ("after", "delay_s"),
    [
        (r"#0 : ", 0.5),  # the store is being created
        (r"job 0 .*: MLflow run ", 0.0),  # the run exists, its worker not started yet
        (r"warm-up step 1/", 0.0),
        (r"job 0 .*images/s \(p5", 0.0),  # the first run is being closed
        (r"job 1 .*: MLflow run ", 1.5),  # the second job's worker is starting
    ],
    ids=["store", "run-made", "warm-up", "closing", "second-job"],
)
def test_a_ctrl_c_at_any_stage_exits_130_with_no_running_run_and_no_process_left(tmp_path, after, delay_s):
    outcome = interrupt_sweeps.interrupt_once(tmp_path, delay_s, interrupt_sweeps.SWEEP, after=after)
    out = (tmp_path / "out.log").read_text()
    assert outcome.delay_s >= 0, f"the sweep ended before its signal: {out[-2000:]}"
    assert outcome.problems == [], out[-3000:]
    assert "logging to MLflow failed" not in out and "stopped by SIGINT" in out
