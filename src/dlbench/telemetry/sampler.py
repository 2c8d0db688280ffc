"""A background thread that samples GPU and host readers at a fixed interval.

It runs in the orchestrator, not the worker, so the timed loop never competes with it for the GIL.
Samples are kept in memory (one dict per tick) and appended to telemetry.csv as they come, so a
crash of the orchestrator still leaves the series on disk.
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from statistics import fmean
from typing import Any, Protocol


class Reader(Protocol):
    def read(self) -> dict[str, float]: ...


class Sampler:
    def __init__(self, readers: Iterable[Reader], interval_s: float, csv_path: Path | None = None) -> None:
        self.readers = list(readers)
        self.interval_s = interval_s
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dlbench-telemetry", daemon=True)
        self._csv_path = csv_path
        self._csv_file = None
        self._csv_writer: Any = None
        self.errors: list[str] = []

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, float]]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._csv_file is not None:
            self._csv_file.close()
        return self.samples

    def sample_once(self) -> dict[str, float]:
        row: dict[str, float] = {"t": time.time()}
        for reader in self.readers:
            try:
                row.update(reader.read())
            except Exception as exc:  # a failing reading must not stop the job
                if len(self.errors) < 5:
                    self.errors.append(f"{type(reader).__name__}: {exc}")
        self.samples.append(row)
        self._append_csv(row)
        return row

    def _loop(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            self.sample_once()
            next_tick += self.interval_s
            delay = next_tick - time.monotonic()
            if delay < 0:  # fell behind (slow reading): skip ticks rather than burst
                next_tick = time.monotonic()
                delay = 0
            self._stop.wait(delay)

    def _append_csv(self, row: dict[str, float]) -> None:
        if self._csv_path is None:
            return
        if self._csv_writer is None:
            self._csv_file = open(self._csv_path, "w", newline="")  # noqa: SIM115 (closed in stop())
            self._csv_writer = csv.DictWriter(self._csv_file, fieldnames=list(row), extrasaction="ignore")
            self._csv_writer.writeheader()
        self._csv_writer.writerow(row)
        self._csv_file.flush()


# Fewer samples than this inside the timed phase make its means (GPU and CPU utilization, power, energy)
# rough: NVML's utilization is the busy fraction of the last 1/6-1 s, so a timed phase shorter than that
# reports mostly the warm-up before it. The figures are still logged; the log and the report say so.
MIN_TIMED_SAMPLES = 5


def rough(timed_samples: float | None) -> bool:
    """Whether means over this many timed-phase samples are rough (None or NaN: not counted, not rough)."""
    return timed_samples is not None and timed_samples < MIN_TIMED_SAMPLES


SUMMARY = {
    # summary metric: (series, reducer)
    "gpu_util_mean": ("gpu0/util", fmean),
    "gpu_mem_util_mean": ("gpu0/mem_util", fmean),
    "gpu_mem_used_mib_max": ("gpu0/mem_used_mib", max),
    "power_w_mean": ("gpu0/power_w", fmean),
    "sm_clock_mhz_mean": ("gpu0/sm_clock_mhz", fmean),
    "cpu_util_mean": ("host/cpu_util", fmean),
    "host_rss_mib_max": ("host/rss_mib", max),
}


def summarize(samples: list[dict[str, float]]) -> dict[str, float]:
    """Reduce samples to the summary metrics. The caller picks them (results.py: the timed phase)."""
    out: dict[str, float] = {}
    for metric, (series, reduce) in SUMMARY.items():
        values = [s[series] for s in samples if series in s]
        if values:
            out[metric] = float(reduce(values))
    return out
