"""Guards against a noisy GPU, through the reader interface with recorded readings (no GPU here): other
processes on the GPU, throttling and clock drops in the timed phase, and the timed phase's energy.
The processes are real ones (the test's own children); only NVML's list of them is recorded."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from dlbench.telemetry.energy import energy_from_counter, energy_from_power, energy_metrics
from dlbench.telemetry.guards import (
    CLOCK_EVENTS_TAG,
    CLOCK_FLAG_TAG,
    CLOCK_RATIO_METRIC,
    FOREIGN_TAG,
    GPU_FLAG_TAG,
    GpuBusyError,
    ProcessWatch,
    clock_drop,
    clock_events,
    clock_guard,
    event_names,
    foreign_processes,
    refuse_if_busy,
    shared_gpu,
)
from dlbench.telemetry.sampler import Sampler
from tests.recorded_nvml import RecordedNvml

POWER_CAP, HW_THERMAL, IDLE = 0x4, 0x40, 0x1
INVISIBLE = (
    4_194_304 + 17
)  # above Linux's largest pid: a pid of another namespace, as NVML reports in a container


def readings(clocks: list[float], events: list[int] | None = None, dt: float = 0.1) -> list[dict[str, float]]:
    """Samples at 10 Hz from t=0 with the given SM clocks (MHz) and clocks-event masks."""
    events = events or [POWER_CAP] * len(clocks)
    return [
        {"t": i * dt, "gpu0/sm_clock_mhz": c, "gpu0/clock_events": float(e)}
        for i, (c, e) in enumerate(zip(clocks, events, strict=True))
    ]


WINDOWS = [(0.0, 0.45), (0.5, 0.95), (1.0, 1.45)]  # three timed windows, five samples each


# ---- clocks ------------------------------------------------------------------------------------
def test_event_names_decode_nvml_bits():
    assert event_names(POWER_CAP | HW_THERMAL) == ["sw_power_cap", "hw_thermal"]
    assert event_names(0) == []
    assert event_names(0x8000) == ["0x8000"]  # a bit this NVML table does not know is kept, not dropped


def test_power_cap_alone_is_recorded_not_flagged():
    samples = readings([1980.0] * 15)
    found = clock_events(samples, WINDOWS)
    assert found.tags == {CLOCK_EVENTS_TAG: "sw_power_cap 100%"}
    assert not found.warnings


def test_thermal_slowdown_in_a_timed_window_is_flagged():
    events = [POWER_CAP] * 15
    events[7] = POWER_CAP | HW_THERMAL  # t = 0.7: inside the second window
    found = clock_events(readings([1980.0] * 15, events), WINDOWS)
    assert found.tags[CLOCK_FLAG_TAG] == "throttled"
    assert found.tags[CLOCK_EVENTS_TAG] == "hw_thermal 7%, sw_power_cap 100%"
    assert "hw_thermal" in found.warnings[0]


def test_throttling_outside_the_timed_windows_is_not_flagged():
    events = [HW_THERMAL] * 3 + [IDLE] * 12
    samples = readings([1980.0] * 15, events)
    found = clock_events(samples, [(0.5, 1.45)])  # warm-up (t < 0.3) throttled; the timed phase did not
    assert CLOCK_FLAG_TAG not in found.tags
    assert found.tags[CLOCK_EVENTS_TAG] == "gpu_idle 100%"


def test_a_window_with_a_lower_clock_is_a_clock_drop():
    clocks = [1980.0] * 10 + [1700.0] * 5  # the third window ran 14% slower
    found = clock_drop(readings(clocks), WINDOWS)
    assert found.tags[CLOCK_FLAG_TAG] == "clock-drop"
    assert found.metrics[CLOCK_RATIO_METRIC] == pytest.approx(1700 / 1980)
    assert "1700 vs 1980 MHz" in found.warnings[0]


def test_one_sample_dip_and_small_wobble_are_no_drop():
    clocks = [1980.0, 1965.0, 1500.0, 1980.0, 1975.0] + [1970.0] * 5 + [1950.0] * 5  # one 1500 sample
    found = clock_drop(readings(clocks), WINDOWS)
    assert CLOCK_FLAG_TAG not in found.tags
    assert found.metrics[CLOCK_RATIO_METRIC] == pytest.approx(1950 / 1975)


def test_with_one_sampled_window_the_samples_are_compared():
    found = clock_drop(readings([1980.0, 1600.0, 1980.0]), [(0.0, 0.25)])
    assert found.tags[CLOCK_FLAG_TAG] == "clock-drop"


def test_clock_guard_names_both_flags():
    events = [POWER_CAP] * 14 + [HW_THERMAL]
    found = clock_guard(readings([1980.0] * 10 + [1500.0] * 5, events), WINDOWS)
    assert found.tags[CLOCK_FLAG_TAG] == "throttled,clock-drop"
    assert len(found.warnings) == 2


def test_no_gpu_readings_no_findings():
    host_only = [{"t": 0.1 * i, "host/cpu_util": 50.0} for i in range(15)]
    assert clock_guard(host_only, WINDOWS).tags == {}
    assert energy_metrics(host_only, WINDOWS, n_samples=100) == {}


# ---- energy ------------------------------------------------------------------------------------
def test_counter_and_integrated_power_agree_on_a_steady_load():
    # 500 W steady: the counter (mJ) grows 50,000 per 0.1 s
    samples = [{"t": 0.1 * i, "gpu0/power_w": 500.0, "gpu0/energy_mj": 9e9 + 50_000.0 * i} for i in range(31)]
    spans = [(0.05, 1.05), (2.0, 2.5)]  # edges between samples: interpolated
    assert energy_from_counter(samples, spans) == pytest.approx(750.0)
    assert energy_from_power(samples, spans) == pytest.approx(750.0)
    out = energy_metrics(samples, spans, n_samples=1500)
    assert out == pytest.approx(
        {"energy_j_counter": 750.0, "energy_j_power": 750.0, "energy_j_per_sample": 0.5}
    )


def test_integrated_power_follows_a_ramp_and_is_used_without_a_counter():
    samples = [{"t": float(i), "gpu0/power_w": 100.0 * i} for i in range(5)]  # 0..400 W over 4 s
    assert energy_from_power(samples, [(0.0, 4.0)]) == pytest.approx(800.0)
    assert energy_from_counter(samples, [(0.0, 4.0)]) is None
    assert energy_metrics(samples, [(1.0, 3.0)], n_samples=4) == pytest.approx(
        {"energy_j_power": 400.0, "energy_j_per_sample": 100.0}
    )


def test_the_counter_is_preferred_when_the_two_differ():
    # power read only at its low instants: integrated power misses the peaks the board counted
    samples = [{"t": float(i), "gpu0/power_w": 100.0, "gpu0/energy_mj": 300_000.0 * i} for i in range(3)]
    out = energy_metrics(samples, [(0.0, 2.0)], n_samples=10)
    assert out["energy_j_counter"] == pytest.approx(600.0)
    assert out["energy_j_power"] == pytest.approx(200.0)
    assert out["energy_j_per_sample"] == pytest.approx(60.0)


def test_past_the_samples_power_is_held_and_the_counter_gives_nothing():
    samples = [{"t": float(i), "gpu0/power_w": 100.0, "gpu0/energy_mj": 1e5 * i} for i in range(3)]
    assert energy_from_power(samples, [(1.0, 5.0)]) == pytest.approx(400.0)
    assert energy_from_counter(samples, [(1.0, 5.0)]) is None  # a counter cannot be extrapolated
    assert energy_from_power([{"t": 0.0}], [(0.0, 1.0)]) is None  # no power readings at all


# ---- other processes on the GPU ------------------------------------------------------------------
@pytest.fixture
def procs() -> Iterator[dict[str, int]]:
    """Real processes: a 'worker' with a child, and an unrelated process."""
    worker = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    deadline = time.monotonic() + 30
    while not psutil.Process(worker.pid).children() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = psutil.Process(worker.pid).children()[0].pid
    try:
        yield {"worker": worker.pid, "child": child, "other": other.pid}
    finally:
        for p in (worker, other):
            p.kill()
            p.wait()
        psutil.Process(child).kill()


def test_the_worker_and_its_children_are_not_foreign(procs):
    listed = {procs["child"]: 30_000.0, procs["other"]: 2_000.0, INVISIBLE: 500.0}
    foreign = foreign_processes(listed, procs["worker"])
    assert [p.pid for p in foreign] == [
        procs["other"],
        INVISIBLE,
    ]  # the worker was seen: invisible is foreign
    assert foreign[0].name.startswith("python")
    assert foreign[1].name == "?"


def test_in_a_container_an_invisible_pid_stands_for_the_worker(procs):
    listed = {INVISIBLE: 30_000.0, procs["other"]: 2_000.0}  # NVML gave the worker's host pid
    assert [p.pid for p in foreign_processes(listed, procs["worker"])] == [procs["other"]]
    assert foreign_processes({INVISIBLE: 30_000.0}, procs["worker"]) == []


def test_shared_gpu_gives_a_tag_and_a_warning(procs):
    found = shared_gpu(foreign_processes({procs["other"]: 2048.0}, procs["worker"]))
    assert found.tags[GPU_FLAG_TAG] == "shared"
    assert found.tags[FOREIGN_TAG].startswith(f"{procs['other']} python")
    assert found.tags[FOREIGN_TAG].endswith("(2,048 MiB)")
    assert "guard.exclusive=true" in found.warnings[0]
    assert shared_gpu([]).tags == {}


def test_exclusive_refuses_a_busy_gpu_with_one_line(procs):
    gpu = RecordedNvml([{}], procs=[{procs["other"]: 1024.0}])
    with pytest.raises(GpuBusyError) as err:
        refuse_if_busy(gpu, exclusive=True)
    message = str(err.value)
    assert "\n" not in message
    assert str(procs["other"]) in message and "guard.exclusive=false" in message
    assert [p.pid for p in refuse_if_busy(gpu, exclusive=False)] == [procs["other"]]
    assert refuse_if_busy(RecordedNvml([{}], procs=[{}]), exclusive=True) == []


def test_process_watch_samples_with_the_telemetry_and_remembers_visitors(procs):
    listings = [
        {procs["child"]: 20_000.0},
        {procs["child"]: 20_000.0, procs["other"]: 800.0},  # another process comes ...
        {procs["child"]: 20_000.0, procs["other"]: 1_200.0},
        {procs["child"]: 20_000.0},  # ... and goes before the job ends
    ]
    gpu = RecordedNvml([{"gpu0/util": 99.0}], procs=listings)
    watch = ProcessWatch(gpu, every_s=0.0)
    watch.attach(procs["worker"])
    sampler = Sampler([gpu, watch], interval_s=0.01)
    rows = [sampler.sample_once() for _ in range(4)]
    assert [r["gpu0/foreign_procs"] for r in rows] == [0.0, 1.0, 1.0, 0.0]
    assert [(p.pid, p.mib) for p in watch.foreign()] == [(procs["other"], 1_200.0)]


def test_process_watch_lists_at_most_every_interval():
    now = [0.0]
    gpu = RecordedNvml([{}], procs=[{}])
    watch = ProcessWatch(gpu, every_s=1.0, clock=lambda: now[0])
    for t in (0.0, 0.1, 0.5, 1.0, 1.5, 2.2):
        now[0] = t
        watch.read()
    assert gpu.listings == 3  # at 0.0, 1.0 and 2.2
