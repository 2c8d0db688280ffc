"""Precision settings that can only crash are refused by the real CLI before a run is made: one line
naming the setting and the fix, a non-zero exit, no traceback, no job run in the store."""

from __future__ import annotations

import pytest

from tests.conftest import TINY

pytestmark = pytest.mark.slow


def test_pure_float16_with_dynamic_loss_scaling_is_one_line_before_any_run(cli):
    res = cli.run([*TINY, "precision=amp", "precision.autocast=false", "precision.cpu_dtype=float16"])
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "Traceback" not in out
    (line,) = [x for x in out.splitlines() if "config error" in x]
    assert "precision.autocast=false with precision.cpu_dtype=float16" in line
    assert "GradScaler refuses float16 gradients" in line and "precision.loss_scale=none" in line
    if cli.db.exists():
        exp = cli.client().get_experiment_by_name("dlbench")
        assert exp is None or not [
            r for r in cli.client().search_runs([exp.experiment_id]) if "framework.name" in r.data.params
        ]
