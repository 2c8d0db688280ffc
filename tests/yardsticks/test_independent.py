"""The yardsticks judge dlbench, so they must not run its code: no module under yardsticks/ imports dlbench,
and the record names the page reads are the ones dlbench writes."""

from __future__ import annotations

import ast

from dlbench.core.names import EXECUTION_TAG, KIND_JOB, KIND_TAG, PARENT_TAG
from dlbench.telemetry.guards import CLOCK_EVENTS_TAG, CLOCK_FLAG_TAG, GPU_FLAG_TAG
from tests.conftest import ROOT
from yardsticks import page


def imported(path) -> set[str]:
    """The top-level package of every import statement in one file."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_no_yardstick_imports_dlbench():
    files = sorted((ROOT / "yardsticks").glob("*.py"))
    assert len(files) >= 6
    assert {f.name: "dlbench" in imported(f) for f in files} == {f.name: False for f in files}


def test_the_page_reads_the_tags_dlbench_writes():
    ours = (PARENT_TAG, KIND_TAG, KIND_JOB, GPU_FLAG_TAG, CLOCK_FLAG_TAG, CLOCK_EVENTS_TAG, EXECUTION_TAG)
    theirs = (page.PARENT_TAG, page.KIND_TAG, page.KIND_JOB, page.GPU_FLAG_TAG, page.CLOCK_FLAG_TAG,
              page.CLOCK_EVENTS_TAG, page.EXECUTION_TAG)  # fmt: skip
    assert theirs == ours
