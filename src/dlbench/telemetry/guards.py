"""Guards against a noisy GPU: another process sharing it, and clocks that throttle or fall.

These are the two most common reasons benchmark numbers drift between runs that should agree, and
neither shows in the throughput itself. The checks take what the telemetry recorded (samples: dicts with
a wall-clock "t" and "gpu0/..." readings; windows: the timed windows as (start, end) wall-clock pairs) and
a reader's compute-process list, so they run the same on any GPU and are tested with recorded readings.
What they find becomes tags (and warnings) on the job's run, never a changed number.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import psutil

from dlbench.errors import ConfigError

GPU_FLAG_TAG = "dlbench.gpu_flag"  # "shared": another process used the GPU while the job ran
CLOCK_FLAG_TAG = "dlbench.clock_flag"  # "throttled", "clock-drop", or both (comma-separated)
FOREIGN_TAG = "guard.foreign_processes"  # who: "pid name (MiB)", ...
CLOCK_EVENTS_TAG = "guard.clock_events"  # which clocks-event reasons held in the timed phase, and how often
CLOCK_RATIO_METRIC = "sm_clock_min_ratio"  # slowest timed window's SM clock / fastest window's

# NVML's clocks-event ("throttle") reason bits, nvmlClocksEventReason* / nvmlClocksThrottleReason*.
CLOCK_EVENTS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
    0x200: "board_limit",
    0x400: "reliability",
}
# Slowdowns a measurement must not hide. sw_power_cap is not among them: a busy GPU boosting up to its
# power limit is how it normally runs (recorded in guard.clock_events, not flagged); when the power cap
# pulls the clock down far, the clock-drop check catches it.
THROTTLING = frozenset({"hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake", "board_limit"})
CLOCK_DROP = 0.10  # flag when a timed window's SM clock is more than 10% below the fastest window's


class GpuBusyError(ConfigError):
    """guard.exclusive=true and another process is on the GPU; the message is one line with the fix."""


@dataclass
class GuardFindings:
    """What the guards found: tags and metrics for the run, warnings for the job's log."""

    tags: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def merge(self, other: GuardFindings) -> GuardFindings:
        self.tags.update(other.tags)
        self.metrics.update(other.metrics)
        self.warnings.extend(other.warnings)
        return self


# ---- clocks ------------------------------------------------------------------------------------
def in_spans(samples: list[dict[str, float]], spans: list[tuple[float, float]]) -> list[dict[str, float]]:
    """The samples taken inside any of the spans."""
    return [s for s in samples if any(t0 <= s["t"] <= t1 for t0, t1 in spans)]


def event_names(mask: int) -> list[str]:
    """The reason names set in an NVML clocks-event mask (unknown bits as hex)."""
    names = [name for bit, name in CLOCK_EVENTS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_EVENTS)
    return names + ([hex(rest)] if rest else [])


def clock_events(
    samples: list[dict[str, float]], windows: list[tuple[float, float]], gpu: int = 0
) -> GuardFindings:
    """How often each clocks-event reason held during the timed windows; `throttled` if any slowdown did."""
    key = f"gpu{gpu}/clock_events"
    masks = [int(s[key]) for s in in_spans(samples, windows) if key in s]
    out = GuardFindings()
    if not masks:
        return out
    counts: dict[str, int] = {}
    for mask in masks:
        for name in event_names(mask):
            counts[name] = counts.get(name, 0) + 1
    if counts:
        out.tags[CLOCK_EVENTS_TAG] = ", ".join(
            f"{n} {100 * c / len(masks):.0f}%" for n, c in sorted(counts.items())
        )
    slow = sorted(THROTTLING & counts.keys())
    if slow:
        out.tags[CLOCK_FLAG_TAG] = "throttled"
        out.warnings.append(
            f"the GPU throttled during the timed phase ({', '.join(slow)}): its throughput is lower than the "
            "GPU can sustain when cool and unthrottled"
        )
    return out


def clock_drop(
    samples: list[dict[str, float]],
    windows: list[tuple[float, float]],
    gpu: int = 0,
    tolerance: float = CLOCK_DROP,
) -> GuardFindings:
    """Compare the SM clock across the timed windows (the median per window, so that one sample's dip is
    no drop); with samples in fewer than two windows, compare the timed samples themselves."""
    key = f"gpu{gpu}/sm_clock_mhz"
    per_window = [[s[key] for s in in_spans(samples, [w]) if key in s] for w in windows]
    values = [statistics.median(v) for v in per_window if v]
    if len(values) < 2:
        values = [s[key] for s in in_spans(samples, windows) if key in s]
    out = GuardFindings()
    if len(values) < 2 or max(values) <= 0:
        return out
    ratio = min(values) / max(values)
    out.metrics[CLOCK_RATIO_METRIC] = ratio
    if ratio < 1.0 - tolerance:
        out.tags[CLOCK_FLAG_TAG] = "clock-drop"
        out.warnings.append(
            f"the SM clock fell to {100 * ratio:.0f}% of its timed-phase peak ({min(values):.0f} vs "
            f"{max(values):.0f} MHz): windows ran at different speeds"
        )
    return out


def clock_guard(
    samples: list[dict[str, float]], windows: list[tuple[float, float]], gpu: int = 0
) -> GuardFindings:
    """Both clock checks; the flag tag says which fired ("throttled,clock-drop" when both)."""
    events, drop = clock_events(samples, windows, gpu), clock_drop(samples, windows, gpu)
    flags = [f for f in (events.tags.get(CLOCK_FLAG_TAG), drop.tags.get(CLOCK_FLAG_TAG)) if f]
    out = GuardFindings().merge(events).merge(drop)
    if flags:
        out.tags[CLOCK_FLAG_TAG] = ",".join(flags)
    return out


# ---- other processes on the GPU ------------------------------------------------------------------
class ProcessLister(Protocol):
    def processes(self) -> dict[int, float]: ...


@dataclass
class GpuProcess:
    pid: int
    mib: float
    name: str  # "?" when the pid is not visible from here (another pid namespace, or it has exited)

    def __str__(self) -> str:
        return f"{self.pid} {self.name} ({self.mib:,.0f} MiB)"


def _name(pid: int) -> str | None:
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return None


def _descends_from(pid: int, ancestor: int) -> bool:
    try:
        return pid == ancestor or any(p.pid == ancestor for p in psutil.Process(pid).parents())
    except psutil.Error:
        return False


def foreign_processes(procs: dict[int, float], worker: int | None) -> list[GpuProcess]:
    """The GPU's compute processes that are not the worker or its descendants.

    NVML lists pids of the host's pid namespace; inside a container those may be invisible here, the
    worker's included. So when a worker runs and none of the visible pids is its own, one invisible pid is
    taken to be the worker and only the others count as foreign. Before the worker starts, every process
    on the GPU is foreign."""
    own = {pid for pid in procs if worker is not None and _descends_from(pid, worker)}
    found = [GpuProcess(pid, mib, _name(pid) or "?") for pid, mib in sorted(procs.items()) if pid not in own]
    if worker is not None and not own:
        hidden = [p for p in found if p.name == "?"]
        if hidden:
            found.remove(hidden[0])
    return found


def shared_gpu(foreign: list[GpuProcess]) -> GuardFindings:
    """Tags and a warning for a job that shared its GPU."""
    out = GuardFindings()
    if foreign:
        who = ", ".join(str(p) for p in foreign)
        out.tags[GPU_FLAG_TAG] = "shared"
        out.tags[FOREIGN_TAG] = who[:5000]
        out.warnings.append(
            f"other processes used the GPU during the job ({who}): its numbers may be low; "
            "guard.exclusive=true refuses to start on a GPU in use"
        )
    return out


def refuse_if_busy(gpu: ProcessLister, exclusive: bool) -> list[GpuProcess]:
    """Before the worker starts: list the processes already on the GPU; with exclusive, refuse to start."""
    foreign = foreign_processes(gpu.processes(), worker=None)
    if foreign and exclusive:
        raise GpuBusyError(
            f"guard.exclusive=true and the GPU is in use by {', '.join(str(p) for p in foreign)}: "
            "stop those processes, pick another GPU (CUDA_VISIBLE_DEVICES), or set guard.exclusive=false"
        )
    return foreign


class ProcessWatch:
    """A telemetry reader (Sampler-compatible) that lists the GPU's compute processes every `every_s`
    seconds and remembers every process that was not the job's worker. Listing costs an NVML call and a
    psutil look-up per process, hence not at every 10 Hz tick."""

    def __init__(self, gpu: ProcessLister, every_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self._gpu = gpu
        self._every_s = every_s
        self._clock = clock
        self._next = 0.0
        self._worker: int | None = None
        self.seen: dict[int, GpuProcess] = {}

    def attach(self, pid: int) -> None:
        """The worker's pid: it and its children are the job, not foreign."""
        self._worker = pid

    def read(self) -> dict[str, float]:
        now = self._clock()
        if now < self._next:
            return {}
        self._next = now + self._every_s
        foreign = foreign_processes(self._gpu.processes(), self._worker)
        for p in foreign:
            known = self.seen.get(p.pid)
            if known is None or p.mib > known.mib:
                self.seen[p.pid] = p
        return {"gpu0/foreign_procs": float(len(foreign))}

    def foreign(self) -> list[GpuProcess]:
        return sorted(self.seen.values(), key=lambda p: p.pid)
