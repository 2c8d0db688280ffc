"""LoadGen's own verdict, read back from the mlperf_log_summary.txt it wrote: the percentiles, the rate
and VALID/INVALID are LoadGen's figures, never recomputed here, so they match what an MLPerf submitter reads.

Framework-free and LoadGen-free: the orchestrator parses the same file it records as an artifact.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

SUMMARY_FILE = "mlperf_log_summary.txt"
DETAIL_FILE = "mlperf_log_detail.txt"
_LINE = re.compile(r"^\s*(?P<key>[^:*]+?)\s*:\s*(?P<value>\S.*?)\s*$")
# LoadGen's percentile lines ("99.90 percentile latency (ns)") -> the metric suffix
_PERCENTILES = {
    "50.00": "p50",
    "90.00": "p90",
    "95.00": "p95",
    "97.00": "p97",
    "99.00": "p99",
    "99.90": "p999",
}
# the line that is each scenario's rate, and what it counts
_RATES = {
    "Samples per second": "samples_per_s",  # Offline
    "Completed samples per second": "samples_per_s",  # Server
    "QPS w/o loadgen overhead": "qps",  # SingleStream (also MultiStream in some LoadGen versions)
}


def read_summary(text: str) -> dict[str, str]:
    """Every "key : value" line of a summary, first occurrence kept (MultiStream repeats none we use)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if (m := _LINE.match(line)) is not None:
            out.setdefault(m["key"], m["value"])
    return out


def serve_metrics(fields: dict[str, str]) -> dict[str, float]:
    """latency_<p>_ms, latency_min/mean/max_ms, and qps / samples_per_s as LoadGen printed them."""
    out: dict[str, float] = {}
    for pct, name in _PERCENTILES.items():
        if (v := fields.get(f"{pct} percentile latency (ns)")) is not None:
            out[f"latency_{name}_ms"] = float(v) / 1e6
    for kind in ("min", "mean", "max"):
        if (v := fields.get(f"{kind.capitalize()} latency (ns)")) is not None:
            out[f"latency_{kind}_ms"] = float(v) / 1e6
    for line, name in _RATES.items():
        if (v := fields.get(line)) is not None:
            out[name] = float(v)
    return out


def invalid_because(text: str) -> str:
    """Why LoadGen judged a test INVALID, in its own words: each "... satisfied : NO" check, then the
    "Recommendations" bullets it printed under them ("Only processed 388 queries."); "" for a VALID test."""
    head = text.split("Additional Stats", 1)[0]
    unmet = [m[1].strip() for m in re.finditer(r"^\s*([^:\n]+?) satisfied\s*:\s*NO\s*$", head, re.M)]
    advice = [m[1].strip() for m in re.finditer(r"^\s*\*\s*(.+?)\s*$", head, re.M)]
    checks = "; ".join(f"{name} not satisfied" for name in unmet)
    return ": ".join(part for part in (checks, " ".join(advice)) if part)


def parse_summary(path: Path) -> dict[str, Any]:
    """{"metrics": {...}, "valid": "VALID"|"INVALID", "invalid_because": ..., "scenario": ..., "settings":
    {...}} from a summary file; settings are LoadGen's "Test Parameters Used" section (what it really ran
    with)."""
    text = path.read_text()
    fields = read_summary(text)
    params = text.split("Test Parameters Used", 1)[1] if "Test Parameters Used" in text else ""
    settings = {k.replace(" (ns)", "_ns").replace(" (ms)", "_ms").replace(" ", "_"): v
                for k, v in read_summary(params).items()}  # fmt: skip
    return {
        "metrics": serve_metrics(fields),
        "valid": fields.get("Result is", "UNKNOWN"),
        "invalid_because": invalid_because(text) if fields.get("Result is") == "INVALID" else "",
        "scenario": fields.get("Scenario", "unknown"),
        "settings": settings,
    }
