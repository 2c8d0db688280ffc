"""Summary metrics from worker events: one repeat, several repeats (spread), telemetry windows."""

from __future__ import annotations

import pytest

from dlbench.results import RepeatRecord, summarize_job


def record(t0: float, throughputs: list[float], power: float | None = None) -> RepeatRecord:
    rec = RepeatRecord(t_start=t0)
    rec.built = {"t": t0 + 2.0, "import_s": 1.2, "build_s": 0.5}
    rec.warmup = {"warmup_s": 3.0}
    t = t0 + 5.0
    for i, tp in enumerate(throughputs):
        rec.windows.append(
            {
                "index": i,
                "t_start": t,
                "t": t + 1.0,
                "seconds": 1.0,
                "samples": int(tp),
                "steps": 1,
                "throughput": tp,
                "loss": 2.0 - 0.1 * i,
                "data_wait_s": 0.25,
            }  # fmt: skip
        )
        t += 1.0
    rec.done = {
        "framework_mem_bytes": 3 * 2**20,
        "precision": {"compute_dtype": "float32"},
        "run": {"data_skipped": 2, "optimizer": "sgd/foreach"},
    }
    return rec


def test_single_repeat_figures():
    rec = record(100.0, [90.0, 100.0, 110.0])
    samples = [{"t": 100.5, "gpu0/util": 0.0, "gpu0/power_w": 50.0}]  # before the timed phase: ignored
    samples += [{"t": 105.5 + i, "gpu0/util": 95.0, "gpu0/power_w": 300.0} for i in range(3)]
    out = summarize_job([rec], samples)
    assert out["throughput"] == 100.0
    assert out["startup_s"] == 2.0 and out["overhead_s"] == pytest.approx(0.3)
    assert out["warmup_s"] == 3.0 and out["data_wait_frac"] == 0.25
    assert (out["loss_first"], out["loss_last"]) == (2.0, pytest.approx(1.8))
    assert out["gpu_util_mean"] == 95.0
    # power integrated over the windows (105-108 s): from 275 W (between the 50 W and 300 W readings) at
    # 105 s, 300 W from 105.5 s, the last reading held to 108 s; 300 samples
    assert out["energy_j_power"] == pytest.approx(0.5 * (275 + 300) / 2 + 2.5 * 300)
    assert out["energy_j_per_sample"] == pytest.approx(out["energy_j_power"] / 300)
    assert "energy_j_counter" not in out  # no energy counter in these readings
    assert out["framework_mem_mib_max"] == 3.0
    assert out["data_skipped"] == 2.0  # a run fact, not a precision fact
    assert "throughput_spread" not in out


def test_step_time_uses_the_mean_units_per_step_when_batches_vary():
    rec = record(100.0, [100.0, 100.0])
    rec.windows[0]["samples"], rec.windows[1]["samples"] = 80, 120  # token counts differ per batch
    out = summarize_job([rec], [])
    assert out["step_time_ms"] == pytest.approx(1000.0 * 100 / 100.0)


def test_samples_per_second_beside_a_throughput_in_other_units():
    rec = record(100.0, [3000.0, 3200.0])  # target tokens/s
    assert "throughput_samples" not in summarize_job([rec], [])  # images: the sample is the unit
    rec.done["run"]["samples_per_unit"] = 0.04  # a sentence per 25 target tokens
    assert summarize_job([rec], [])["throughput_samples"] == pytest.approx(3100.0 * 0.04)  # sentences/s


def test_repeats_report_median_of_medians_and_spread():
    recs = [
        record(100.0, [100.0, 100.0, 100.0]),
        record(200.0, [108.0, 108.0, 108.0]),
        record(300.0, [104.0] * 3),
    ]
    out = summarize_job(recs, [])
    assert out["throughput"] == 104.0
    assert out["throughput_spread"] == pytest.approx(8.0 / 104.0)
    assert out["repeats_done"] == 3
    assert out["throughput_p05"] == 100.0 and out["throughput_p95"] == 108.0


def test_telemetry_between_repeats_is_not_counted():
    recs = [record(100.0, [100.0]), record(200.0, [100.0])]
    samples = [
        {"t": 105.5, "host/cpu_util": 90.0},
        {"t": 150.0, "host/cpu_util": 0.0},
        {"t": 205.5, "host/cpu_util": 80.0},
    ]
    assert summarize_job(recs, samples)["cpu_util_mean"] == 85.0


def test_a_failed_first_step_still_yields_what_was_collected():
    rec = RepeatRecord(t_start=0.0)
    rec.built = {"t": 1.0, "import_s": 0.5, "build_s": 0.2}
    out = summarize_job([rec], [])
    assert out["startup_s"] == 1.0 and "throughput" not in out


def test_a_timed_phase_between_two_samples_uses_the_nearest():
    rec = record(100.0, [100.0])  # timed from 105.0 to 106.0
    samples = [
        {"t": 104.0, "host/cpu_util": 10.0},
        {"t": 106.3, "host/cpu_util": 90.0, "host/rss_mib": 512.0},
    ]
    out = summarize_job([rec], samples)
    assert out["cpu_util_mean"] == 90.0 and out["host_rss_mib_max"] == 512.0
    assert (
        out["telemetry_samples"] == 0
    )  # the nearest sample stands in, but none fell inside: the report marks it


def test_the_number_of_samples_inside_the_timed_phase_is_logged():
    rec = record(100.0, [100.0])  # timed from 105.0 to 106.0
    samples = [{"t": 104.95 + 0.1 * i, "host/cpu_util": 50.0} for i in range(13)]  # 104.95 ... 106.15
    assert summarize_job([rec], samples)["telemetry_samples"] == 10
    assert "telemetry_samples" not in summarize_job([rec], [])  # telemetry off: nothing to count
