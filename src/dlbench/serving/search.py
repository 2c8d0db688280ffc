"""Server's peak rate the way MLPerf submitters find it: short LoadGen tests at trial rates, bisecting
between the highest rate whose p99 met the bound and the lowest that did not, within `serve.search_budget_s`;
then one confirming test at the rate found, with the full settings (run by the caller).

Runs in the worker; a trial's verdict is LoadGen's own "Performance constraints satisfied" line (the latency
bound at its percentile), read with serving/summary.py from the trial's own summary file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlbench.serving.summary import SUMMARY_FILE, read_summary

CLOSE_ENOUGH = 0.05  # stop bisecting when the bracket is within 5% of its upper end
Trial = Callable[[float, Path], None]  # run one short Server test at this rate, logs into this folder


def trial_result(log_dir: Path, qps: float) -> dict[str, Any]:
    """One trial as LoadGen judged it: its rate, p99 (ms) and whether the latency bound held."""
    fields = read_summary((log_dir / SUMMARY_FILE).read_text())
    p99 = float(fields.get("99.00 percentile latency (ns)", "nan")) / 1e6
    met = fields.get("Performance constraints satisfied", "NO").lower().startswith("yes")
    return {"qps": qps, "p99_ms": p99, "met": met}


def find_peak_qps(trial: Trial, start_qps: float, budget_s: float, out_dir: Path) -> tuple[float, list[dict]]:
    """The highest rate that met the bound (0.0 when none did) and every trial, in order. Doubles up from
    `start_qps` while the bound holds, halves down while it does not, then bisects the bracket."""
    deadline = time.monotonic() + budget_s
    good, bad, trials = 0.0, float("inf"), []
    qps = start_qps
    last_s = 0.0
    while time.monotonic() + last_s <= deadline:
        t = time.monotonic()
        folder = out_dir / f"trial{len(trials):02d}"
        folder.mkdir(parents=True, exist_ok=True)
        trial(qps, folder)
        trials.append(trial_result(folder, qps))
        last_s = time.monotonic() - t
        if trials[-1]["met"]:
            good = max(good, qps)
        else:
            bad = min(bad, qps)
        if bad < float("inf") and good > 0 and (bad - good) <= CLOSE_ENOUGH * bad:
            break
        qps = (
            (good + bad) / 2
            if good > 0 and bad < float("inf")
            else (qps * 2 if bad == float("inf") else qps / 2)
        )
    return good, trials
