"""Telemetry through its reader interface: recorded GPU samples replayed, real host readings."""

from __future__ import annotations

import csv
import os
import time

from dlbench.telemetry.host import HostReader
from dlbench.telemetry.nvml import NvmlReader, visible_devices
from dlbench.telemetry.plot import plot_telemetry
from dlbench.telemetry.sampler import Sampler, summarize

# Recorded on an H200 (NVML through nvidia-ml-py) during ResNet-50 AMP training: idle, busy, busy.
RECORDED = [
    {"gpu0/util": 0.0, "gpu0/mem_util": 0.0, "gpu0/mem_used_mib": 512.0, "gpu0/power_w": 88.0},
    {"gpu0/util": 97.0, "gpu0/mem_util": 61.0, "gpu0/mem_used_mib": 30210.0, "gpu0/power_w": 612.0},
    {"gpu0/util": 99.0, "gpu0/mem_util": 63.0, "gpu0/mem_used_mib": 30222.0, "gpu0/power_w": 640.0},
]


class Replay:
    """A reader that replays recorded readings in order (then repeats the last one)."""

    def __init__(self, rows):
        self.rows = list(rows)
        self.i = 0

    def read(self):
        row = self.rows[min(self.i, len(self.rows) - 1)]
        self.i += 1
        return dict(row)


def test_visible_devices_follows_cuda_rules():
    assert visible_devices(None) is None
    assert visible_devices("") == []
    assert visible_devices("2,0") == ["2", "0"]
    assert visible_devices("GPU-abc, 1") == ["GPU-abc", "1"]
    assert visible_devices("1,-1,0") == ["1"]  # CUDA ignores everything after an invalid entry


def test_without_nvml_the_reader_says_why():
    reader, why = NvmlReader.open(os.environ.get("CUDA_VISIBLE_DEVICES"))
    if reader is None:  # this machine (no GPU)
        assert why
    else:  # a GPU machine: real readings
        row = reader.read()
        assert row["gpu0/mem_used_mib"] > 0
        reader.close()


def test_summary_reduces_each_series():
    samples = [{"t": float(i), **row} for i, row in enumerate(RECORDED)]
    out = summarize(samples[1:3])  # the samples at t = 1 and 2
    assert out["gpu_util_mean"] == 98.0
    assert out["gpu_mem_used_mib_max"] == 30222.0
    assert out["power_w_mean"] == 626.0
    assert "cpu_util_mean" not in out  # no host series recorded


def test_sampler_samples_at_its_interval_and_writes_csv(tmp_path):
    host = HostReader()
    host.attach(os.getpid())
    sampler = Sampler([Replay(RECORDED), host], interval_s=0.05, csv_path=tmp_path / "t.csv").start()
    time.sleep(0.6)
    samples = sampler.stop()
    assert 6 <= len(samples) <= 16
    assert samples[1]["gpu0/util"] == 97.0
    assert all(s["host/rss_mib"] > 1 for s in samples)
    assert 0 <= samples[-1]["host/cpu_util"] <= 100
    with open(tmp_path / "t.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(samples) and float(rows[2]["gpu0/util"]) == 99.0


def test_a_failing_reader_does_not_stop_sampling():
    class Broken:
        def read(self):
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    sampler = Sampler([Broken(), Replay(RECORDED)], interval_s=0.01)
    rows = [sampler.sample_once() for _ in range(3)]
    assert [r["gpu0/util"] for r in rows] == [0.0, 97.0, 99.0]
    assert "GPU_IS_LOST" in sampler.errors[0]


def test_plot_draws_every_recorded_series(tmp_path):
    samples = [{"t": 100.0 + i, **row, "host/cpu_util": 50.0} for i, row in enumerate(RECORDED)]
    assert plot_telemetry(samples, tmp_path / "t.png", 100.0, [(100.0, 101.0)], "test")
    assert (tmp_path / "t.png").stat().st_size > 5000
    assert not plot_telemetry([], tmp_path / "empty.png", 0.0, [], "none")
