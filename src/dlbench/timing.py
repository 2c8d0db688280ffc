"""The timing method (docs/architecture.md, "Timing"): warm-up, then windows of k steps that are
device-synchronized only at their edges; each window yields one throughput figure in the task's unit
(images/s, target tokens/s, samples/s): the units the window's steps really consumed, as the bench's
source counted them on the host, over the window's seconds."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from dlbench.config import ScheduleConfig
from dlbench.core.bench import Bench

Emit = Callable[..., None]


def warm_up(bench: Bench, steps: int, emit: Emit) -> float:
    """Run the warm-up steps (compilation, autotuning); return their wall time in seconds."""
    start = time.perf_counter()
    for i in range(steps):
        bench.step()
        bench.sync()  # warm-up is untimed per step: syncing keeps the progress display honest
        emit("warmup_step", step=i + 1, of=steps)
    bench.sync()
    return time.perf_counter() - start


def fit_steps(
    bench: Bench, schedule: ScheduleConfig, agree: Callable[[int], int] | None = None
) -> tuple[int, int]:
    """(steps each timed window runs, probe steps run here). schedule.min_timed_s set: a probe after the
    warm-up (untimed, counted in it) runs steps for a window's share of those seconds and times the step
    over the second half only: the first steps after warm-up run slower (caches, allocator, a filling
    device queue) and would make the windows too short. The first half synchronizes every step, so it ends
    on time where the host issues steps faster than the device runs them (an asynchronous GPU step); its
    steps set the count the second half runs unsynchronized. The windows then get the steps that
    min_timed_s takes over all of them, never fewer than steps_per_window. `agree` makes the ranks of a job
    run one count: each probes steps_per_window steps (a count, not a time, or one would wait in a
    collective the others never join)."""
    spw = schedule.steps_per_window
    if not schedule.min_timed_s:
        return spw, 0
    share = schedule.min_timed_s / schedule.windows
    if agree is not None:
        settling, count = 0, spw
    else:
        start = time.perf_counter()
        settling = steps_synced(bench, share / 2)
        count = max(1, round(share / 2 / ((time.perf_counter() - start) / settling)))
    start = time.perf_counter()
    steps_for(bench, count)
    step_s = max((time.perf_counter() - start) / count, 1e-9)
    steps = max(spw, math.ceil(share / step_s))
    return (agree(steps) if agree else steps), settling + count


def steps_synced(bench: Bench, seconds: float) -> int:
    """Steps, each followed by a device synchronization, until `seconds` have passed (at least one); return
    how many ran. Untimed: the per-step sync keeps the host from queueing more device work than `seconds`
    holds."""
    start, done = time.perf_counter(), 0
    while True:
        bench.step()
        bench.sync()
        done += 1
        if time.perf_counter() - start >= seconds:
            return done


def steps_for(bench: Bench, count: int) -> None:
    """Run `count` steps, then synchronize the device once. Unsynchronized steps are fine: the device
    finishes them no sooner than the host has issued them, and the closing sync counts what is still
    queued."""
    for _ in range(count):
        bench.step()
    bench.sync()


def timed_windows(
    bench: Bench, schedule: ScheduleConfig, emit: Emit, on_first_step=None, steps: int | None = None
) -> list[float]:
    """Run the timed windows of `steps` steps each (default schedule.steps_per_window), emitting one
    `window` event each; return the per-window units/s."""
    k = steps or schedule.steps_per_window
    return [
        timed_window(bench, index, k, emit, on_first_step if index == 0 else None)
        for index in range(schedule.windows)
    ]


def timed_window(bench: Bench, index: int, steps: int, emit: Emit, on_first_step=None) -> float:
    """`steps` steps synchronized at both edges, reported as one `window` event; returns units/s.
    (mode=converge times each epoch's training as one window.)"""
    wait0, units0 = bench.data_wait_s(), bench.units()
    wall = time.time()
    start = time.perf_counter()
    for i in range(steps):
        if on_first_step is not None and i == 0:
            on_first_step()
        bench.step()
    bench.sync()
    seconds = time.perf_counter() - start
    units = bench.units() - units0
    throughput = units / seconds
    emit(
        "window",
        index=index,
        steps=steps,
        samples=units,
        seconds=seconds,
        throughput=throughput,
        loss=bench.loss(),
        data_wait_s=bench.data_wait_s() - wait0,
        t_start=wall,
    )
    return throughput


def summarize(throughputs: list[float], units_per_step: float) -> dict[str, Any]:
    """Median throughput with p5/p95 and coefficient of variation over windows; step_time_ms is the
    time of a step of `units_per_step` units (the mean over the windows when batches vary)."""
    xs = sorted(throughputs)
    median = statistics.median(xs)
    mean = statistics.fmean(xs)
    return {
        "throughput": median,
        "throughput_p05": percentile(xs, 5),
        "throughput_p95": percentile(xs, 95),
        "throughput_cv": (statistics.pstdev(xs) / mean) if mean else 0.0,
        "step_time_ms": 1000.0 * units_per_step / median if median else 0.0,
    }


def percentile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolated percentile of an already sorted list (numpy's default method)."""
    if not sorted_xs:
        return float("nan")
    pos = (len(sorted_xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)
