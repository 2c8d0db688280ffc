"""Scaling efficiency pairs a run on N devices only with the 1-device run of the same sweep and setting."""

from __future__ import annotations

import pytest

from dlbench.report.load import JobRow
from dlbench.report.scaling import scalings


def row(run_id: str, devices: int | None, throughput: float, sitting: str = "s1", **params: str) -> JobRow:
    variant = dict(params) | ({"devices": str(devices)} if devices is not None else {})
    return JobRow(
        run_id, run_id, "FINISHED", "torch", "resnet_cifar", "fp32", "train", 0,
        {"throughput": throughput}, variant, sitting=sitting, unit="images",
    )  # fmt: skip


def test_efficiency_is_n_device_throughput_over_n_times_one_device():
    (s,) = scalings([row("a", 1, 100.0, **{"threads.intra_op": "2"}), row("b", 2, 150.0)])
    assert s.efficiency == pytest.approx(0.75)
    assert "2 devices 150 images/s, 1 device 100 images/s: scaling efficiency 75%" in s.line


def test_a_run_recorded_before_devices_existed_counts_as_one_device():
    (s,) = scalings([row("old", None, 10.0), row("b", 2, 18.0)])
    assert s.one.run_id == "old" and s.efficiency == pytest.approx(0.9)


def test_other_sweeps_and_other_settings_are_not_paired():
    assert scalings([row("a", 1, 100.0, sitting="s0"), row("b", 2, 150.0)]) == []
    assert scalings([row("a", 1, 100.0, batch_size="8"), row("b", 2, 150.0, batch_size="16")]) == []
