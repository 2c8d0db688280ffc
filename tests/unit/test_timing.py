"""The timing method: windows synchronized at their edges, median and percentiles."""

from __future__ import annotations

import time

import pytest

from dlbench.config import ScheduleConfig
from dlbench.events import EventReader
from dlbench.timing import fit_steps, percentile, summarize, timed_windows, warm_up


class CountingBench:
    """A CPU workload with a known cost per step, to check what the timer counts."""

    device = "cpu"
    unit = "images"

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.steps = 0
        self.syncs = 0
        self.per_step = [4]  # units of each step's batch, cycled

    def units(self) -> int:
        return sum(self.per_step[i % len(self.per_step)] for i in range(self.steps))

    def step(self) -> None:
        time.sleep(self.step_s)
        self.steps += 1

    def sync(self) -> None:
        self.syncs += 1

    def loss(self) -> float:
        return 1.0 / self.steps

    def data_wait_s(self) -> float:
        return 0.0


def test_windows_sync_only_at_edges_and_measure_the_steps():
    bench = CountingBench(step_s=0.01)
    events = []
    out = timed_windows(bench, ScheduleConfig(steps_per_window=5, windows=3), lambda e, **d: events.append(d))
    assert bench.steps == 15 and bench.syncs == 3
    assert len(out) == 3 and [e["index"] for e in events] == [0, 1, 2]
    for tp in out:  # 4 samples per 10 ms step = 400/s at most
        assert 250 < tp <= 400
    assert events[-1]["loss"] == pytest.approx(1 / 15)


def test_windows_count_the_units_each_step_really_processed():
    # A translation batch holds a different number of target tokens each step: the window sums them.
    bench = CountingBench(step_s=0.0)
    bench.per_step = [30, 50, 70]
    events = []
    timed_windows(bench, ScheduleConfig(steps_per_window=3, windows=2), lambda e, **d: events.append(d))
    assert [e["samples"] for e in events] == [150, 150]
    assert all(e["throughput"] == pytest.approx(150 / e["seconds"]) for e in events)


def test_warm_up_reports_each_step():
    bench = CountingBench(step_s=0.0)
    seen = []
    warm_up(bench, 3, lambda e, **d: seen.append((e, d["step"])))
    assert seen == [("warmup_step", 1), ("warmup_step", 2), ("warmup_step", 3)]


def test_summary_statistics():
    stats = summarize([10.0, 30.0, 20.0, 40.0, 50.0], units_per_step=10)
    assert stats["throughput"] == 30.0
    assert stats["throughput_p05"] == pytest.approx(12.0)
    assert stats["throughput_p95"] == pytest.approx(48.0)
    assert stats["step_time_ms"] == pytest.approx(1000 * 10 / 30)
    assert percentile([1.0], 50) == 1.0


def test_event_reader_joins_partial_lines():
    reader = EventReader()
    assert reader.feed(b'{"event": "hello", "t": 1}\n{"event": "bu') == [{"event": "hello", "t": 1}]
    assert reader.feed(b'ilt", "t": 2}\n') == [{"event": "built", "t": 2}]


def test_min_timed_s_fits_the_windows_to_the_measured_step():
    # 10 ms steps, 4 windows, 0.4 s asked for: a probe of about 0.1 s (10 steps), then 10 steps per window
    bench = CountingBench(step_s=0.01)
    schedule = ScheduleConfig(steps_per_window=2, windows=4, min_timed_s=0.4)
    steps, probe = fit_steps(bench, schedule)
    assert probe == bench.steps and 2 <= probe <= 10  # untimed
    assert 2 <= bench.syncs < probe  # the first half syncs each step, the timed second half only at its end
    assert 5 <= steps <= 10  # sleep overshoots, never undershoots: at most the exact count
    events = []
    timed_windows(bench, schedule, lambda e, **d: events.append(d), steps=steps)
    assert [e["steps"] for e in events] == [steps] * 4
    assert sum(e["seconds"] for e in events) >= 4 * steps * 0.01


def test_min_timed_s_never_shortens_a_window_and_probes_a_long_step_once():
    long_steps = CountingBench(step_s=0.05)  # one step fills each half of a window's share: two probe steps
    assert fit_steps(long_steps, ScheduleConfig(steps_per_window=20, windows=2, min_timed_s=0.1)) == (20, 2)
    assert long_steps.steps == 2 and long_steps.syncs == 2  # synchronized before the timed windows start
    unset = CountingBench(step_s=0.01)
    assert fit_steps(unset, ScheduleConfig(steps_per_window=7)) == (7, 0) and unset.steps == 0


class SettlingBench(CountingBench):
    """Its first steps after warm-up are slow, as a CPU's are while caches and the allocator settle."""

    def __init__(self, slow: int, slow_s: float, step_s: float) -> None:
        super().__init__(step_s)
        self.slow, self.slow_s = slow, slow_s

    def step(self) -> None:
        time.sleep(self.slow_s if self.steps < self.slow else self.step_s)
        self.steps += 1


def test_min_timed_s_times_the_settled_steps_not_the_first_ones():
    # two 0.1 s steps fill the probe's first half (0.2 s); its second half runs 10 ms steps. Timing the whole
    # probe would have found 0.4 s / (2 + 20) steps: at most 22 steps a window instead of about 40.
    bench = SettlingBench(slow=2, slow_s=0.1, step_s=0.01)
    steps, probe = fit_steps(bench, ScheduleConfig(steps_per_window=1, windows=1, min_timed_s=0.4))
    assert probe == bench.steps and steps > 25


class QueueBench(CountingBench):
    """An asynchronous device: a step costs the host `launch_s` and queues `step_s` of device work, which
    runs back to back; sync waits for the queue to drain, as a GPU's does."""

    def __init__(self, launch_s: float, step_s: float) -> None:
        super().__init__(step_s)
        self.launch_s, self.busy_until = launch_s, 0.0

    def step(self) -> None:
        time.sleep(self.launch_s)
        self.busy_until = max(self.busy_until, time.perf_counter()) + self.step_s
        self.steps += 1

    def sync(self) -> None:
        time.sleep(max(0.0, self.busy_until - time.perf_counter()))
        self.syncs += 1


def test_min_timed_s_probe_ends_on_time_when_the_host_runs_ahead_of_the_device():
    """The host issues a step in 1 ms, the device runs it in 40 ms. A probe bounded by host time alone would
    queue about 100 steps in its first 0.1 s and wait 4 s for them; it takes about a window's share."""
    bench = QueueBench(launch_s=0.001, step_s=0.04)
    start = time.perf_counter()
    steps, probe = fit_steps(bench, ScheduleConfig(steps_per_window=1, windows=2, min_timed_s=0.4))
    assert time.perf_counter() - start < 0.5 and probe <= 10
    assert 4 <= steps <= 5  # the window's share (0.2 s) of 40 ms device steps


def test_min_timed_s_ranks_probe_a_count_of_steps_and_agree_on_the_windows():
    """`agree` stands for the ranks' all-reduce: the other rank's step was slower and it wants 3 steps."""
    bench = CountingBench(step_s=0.05)
    schedule = ScheduleConfig(steps_per_window=2, windows=1, min_timed_s=0.01)
    assert fit_steps(bench, schedule, agree=lambda steps: 3) == (3, 2) and bench.steps == 2
