"""Energy of the timed phase, two ways: NVML's total-energy counter where the GPU has one (Volta and
later), and the board power integrated over time, which every GPU with a power reading allows.

The counter is the better figure: it accumulates on the board, so it misses nothing between two samples,
whereas integrated power only knows the instants the sampler read (10 Hz). Both are recorded so the two
can be compared; `energy_j_per_sample` uses the counter when there is one.
"""

from __future__ import annotations

from bisect import bisect_left

Sample = dict[str, float]


def _series(samples: list[Sample], key: str) -> tuple[list[float], list[float]]:
    points = sorted((s["t"], s[key]) for s in samples if key in s)
    return [t for t, _ in points], [v for _, v in points]


def _at(ts: list[float], vs: list[float], t: float, hold: bool = False) -> float | None:
    """The series' value at t, linear between the samples around it. Outside the sampled time: None, or
    with hold the nearest sample's value (a power reading, not a counter, may be held)."""
    if not ts:
        return None
    if t < ts[0] or t > ts[-1]:
        return (vs[0] if t < ts[0] else vs[-1]) if hold else None
    i = bisect_left(ts, t)
    if ts[i] == t:
        return vs[i]
    t0, t1, v0, v1 = ts[i - 1], ts[i], vs[i - 1], vs[i]
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def energy_from_counter(
    samples: list[Sample], spans: list[tuple[float, float]], gpu: int = 0
) -> float | None:
    """Joules the board counted during the spans (counter read in mJ); None without the counter or when a
    span is not covered by samples on both sides."""
    ts, vs = _series(samples, f"gpu{gpu}/energy_mj")
    total = 0.0
    for t0, t1 in spans:
        start, end = _at(ts, vs, t0), _at(ts, vs, t1)
        if start is None or end is None:
            return None
        total += end - start
    return total / 1000.0 if spans else None


def energy_from_power(samples: list[Sample], spans: list[tuple[float, float]], gpu: int = 0) -> float | None:
    """Joules from the board power (W) integrated by the trapezoid rule over the spans (the first or last
    reading held where a span reaches past the samples); None without power readings."""
    ts, vs = _series(samples, f"gpu{gpu}/power_w")
    if not ts:
        return None
    total = 0.0
    for t0, t1 in spans:
        start, end = _at(ts, vs, t0, hold=True), _at(ts, vs, t1, hold=True)
        inside = [(t, v) for t, v in zip(ts, vs, strict=True) if t0 < t < t1]
        points = [(t0, start), *inside, (t1, end)]
        total += sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(points, points[1:], strict=False))
    return total if spans else None


def energy_metrics(
    samples: list[Sample], spans: list[tuple[float, float]], n_samples: int, gpu: int = 0
) -> dict[str, float]:
    """energy_j_counter and energy_j_power (whichever can be had), and energy_j_per_sample from the counter
    when the GPU has one, else from integrated power. n_samples: what the spans processed."""
    out: dict[str, float] = {}
    counter, power = energy_from_counter(samples, spans, gpu), energy_from_power(samples, spans, gpu)
    if counter is not None:
        out["energy_j_counter"] = counter
    if power is not None:
        out["energy_j_power"] = power
    best = counter if counter is not None else power
    if best is not None and n_samples > 0:
        out["energy_j_per_sample"] = best / n_samples
    return out
