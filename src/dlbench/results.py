"""From what the worker(s) reported to the summary metrics of one job (DESIGN "Timing", "MLflow").

A job runs `schedule.repeats` times, each in a fresh worker; each repeat is one `RepeatRecord`.
With one repeat the figures are that repeat's; with several, `throughput` is the median of the
repeats' medians and `throughput_spread` their (max - min) / median, flagged above 5%.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from dlbench.telemetry.energy import energy_metrics
from dlbench.telemetry.sampler import summarize as summarize_samples
from dlbench.timing import percentile
from dlbench.timing import summarize as summarize_windows

MESSAGE_CHARS = 500  # failure.message: one line, short enough to read in the MLflow UI


@dataclass
class Failure:
    """Why a job did not finish: `kind` (crash, oom, timeout, config, interrupted) and one line."""

    kind: str
    message: str

    def __post_init__(self) -> None:
        lines = [line.strip() for line in self.message.strip().splitlines() if line.strip()]
        self.message = (lines[0] if lines else self.kind)[:MESSAGE_CHARS]


@dataclass
class RepeatRecord:
    """Everything one worker told us, kept as it arrives so a failure loses nothing."""

    t_start: float = field(default_factory=time.time)
    built: dict[str, Any] | None = None
    warmup: dict[str, Any] | None = None
    windows: list[dict[str, Any]] = field(default_factory=list)
    epochs: list[dict[str, Any]] = field(default_factory=list)  # mode=converge: one `epoch` event each
    served: dict[str, Any] | None = None  # mode=serve: the `served` event (LoadGen's test)
    done: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def startup_s(self) -> float | None:
        return self.built["t"] - self.t_start if self.built else None

    @property
    def median_throughput(self) -> float | None:
        return statistics.median(w["throughput"] for w in self.windows) if self.windows else None

    def timed_span(self) -> tuple[float, float] | None:
        if self.served:  # mode=serve: LoadGen's test is the timed phase
            return self.served["t_start"], self.served["t_start"] + self.served["seconds"]
        return (self.windows[0]["t_start"], self.windows[-1]["t"]) if self.windows else None

    def warmup_span(self) -> tuple[float, float] | None:
        if not (self.built and self.warmup):
            return None
        return self.built["t"], self.built["t"] + self.warmup["warmup_s"]


def summarize_job(records: list[RepeatRecord], samples: list[dict[str, float]]) -> dict[str, float]:
    """The job's summary metrics; telemetry is reduced over the timed phases only."""
    out: dict[str, float] = {"total_s": time.time() - records[0].t_start} if records else {}
    first = records[0] if records else None
    if first and first.built:
        out["startup_s"] = first.startup_s
        out["import_s"], out["build_s"] = first.built["import_s"], first.built["build_s"]
        out["overhead_s"] = first.startup_s - first.built["import_s"] - first.built["build_s"]
    warmups = [r.warmup["warmup_s"] for r in records if r.warmup]
    if warmups:
        out["warmup_s"] = statistics.median(warmups)
    windows = [w for r in records for w in r.windows]
    if windows:
        out.update(_window_figures(records, windows))
        out.update(_telemetry_figures(records, samples, windows))
    elif any(r.served for r in records):  # mode=serve: host/GPU figures over LoadGen's test
        spans = [r.timed_span() for r in records if r.served]
        out.update(summarize_samples([s for s in samples if any(t0 <= s["t"] <= t1 for t0, t1 in spans)]))
    per_unit = [r.done.get("run", {}).get("samples_per_unit") for r in records if r.done]
    if "throughput" in out and per_unit and all(per_unit):  # e.g. sentences/s beside target tokens/s
        out["throughput_samples"] = out["throughput"] * statistics.median(per_unit)
    skipped = [r.done.get("run", {}).get("data_skipped") for r in records if r.done]
    if any(x is not None for x in skipped):
        out["data_skipped"] = float(max(x or 0 for x in skipped))
    mems = [r.done["framework_mem_bytes"] for r in records if r.done and r.done.get("framework_mem_bytes")]
    if mems:
        out["framework_mem_mib_max"] = max(mems) / 2**20
    return out


def _window_figures(records: list[RepeatRecord], windows: list[dict[str, Any]]) -> dict[str, float]:
    per_step = sum(w["samples"] for w in windows) / sum(w["steps"] for w in windows)  # units, may vary
    out = summarize_windows([w["throughput"] for w in windows], per_step)
    medians = [r.median_throughput for r in records if r.windows]
    if len(medians) > 1:
        median = statistics.median(medians)
        out["throughput"] = median
        out["step_time_ms"] = 1000.0 * per_step / median
        out["throughput_spread"] = (max(medians) - min(medians)) / median
        out["repeats_done"] = len(medians)
    xs = sorted(w["throughput"] for w in windows)
    out["throughput_p05"], out["throughput_p95"] = percentile(xs, 5), percentile(xs, 95)
    seconds = sum(w["seconds"] for w in windows)
    out["timed_s"] = seconds  # every repeat's windows: what the telemetry means cover
    out["steps_per_window"] = statistics.median(w["steps"] for w in windows)  # after schedule.min_timed_s
    out["data_wait_frac"] = sum(w.get("data_wait_s", 0.0) for w in windows) / seconds
    losses = [w["loss"] for w in windows if w.get("loss") is not None]
    if losses:
        out["loss_first"], out["loss_last"] = losses[0], losses[-1]
    return out


def _telemetry_figures(
    records: list[RepeatRecord], samples: list[dict[str, float]], windows: list[dict[str, Any]]
) -> dict[str, float]:
    spans = [r.timed_span() for r in records if r.timed_span()]
    inside = [s for s in samples if any(t0 <= s["t"] <= t1 for t0, t1 in spans)]
    counted = len(inside)
    if not inside and samples:  # a timed phase shorter than the sampling interval: nearest sample
        inside = [min(samples, key=lambda s: min(abs(s["t"] - (t0 + t1) / 2) for t0, t1 in spans))]
    out = summarize_samples(inside)
    if samples:  # how many readings the means rest on (MIN_TIMED_SAMPLES: fewer make them rough)
        out["telemetry_samples"] = float(counted)
    spans = window_spans(records)
    out.update(energy_metrics(samples, spans, sum(w["samples"] for w in windows)))
    return out


def window_spans(records: list[RepeatRecord]) -> list[tuple[float, float]]:
    """Every timed window as (start, end) wall-clock seconds: what the clock and energy figures cover."""
    return [(w["t_start"], w["t"]) for r in records for w in r.windows]
