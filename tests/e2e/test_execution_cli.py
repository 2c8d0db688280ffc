"""Execution mode through the real CLI: one sweep crosses frameworks with execution=eager,compiled; each
run is tagged with the mode it ran in, and the report compares frameworks only within one class."""

from __future__ import annotations

import pytest

from tests.conftest import TINY

pytestmark = pytest.mark.slow


def test_a_framework_sweep_over_execution_modes_compares_like_with_like(cli):
    res = cli.run(["framework=tf,torch", "execution=eager,compiled", *TINY], timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    kids = [r for r in cli.runs() if "mlflow.parentRunId" in r.data.tags]
    modes = sorted((r.data.params["framework.name"], r.data.tags["run.execution"]) for r in kids)
    assert modes == [("tf", "graph"), ("tf", "xla"), ("torch", "eager"), ("torch", "torch.compile(default)")]
    assert all(r.info.status == "FINISHED" for r in kids)
    by_mode = {r.data.tags["run.execution"]: r for r in kids}
    assert by_mode["xla"].data.params["framework.xla"] == "True"
    assert by_mode["torch.compile(default)"].data.params["framework.compile"] == "True"
    report = (cli.tmp / "sweep" / "report" / "report.md").read_text()
    findings = report.split("## Findings", 1)[1].split("\n## ", 1)[0]
    first = next(line for line in findings.splitlines() if line.startswith("- "))
    assert first.startswith("- These runs mix execution modes (tf: graph, xla; torch: eager, torch.compile")
    assert "## resnet_cifar train, compiled" in report and "## resnet_cifar train, eager/graph" in report
    for line in findings.splitlines():  # a framework claim names one class only
        if " than " in line and "faster" in line:
            assert ("(compiled runs)" in line) != ("(eager/graph runs)" in line), line
