"""What a mode=serve run records in MLflow: LoadGen's figures from its own summary, its verdict, the
settings it really ran with, and its summary and detail logs as artifacts (docs/architecture.md)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from dlbench.core.names import SERVE_INVALID_TAG, SERVE_SCENARIO_TAG, SERVE_VALID_TAG
from dlbench.serving.summary import DETAIL_FILE, SUMMARY_FILE, parse_summary

log = logging.getLogger("dlbench")
_RATES = (("samples_per_s", "samples"), ("qps", "queries"))  # MultiStream's summary reports neither


def record_served(run: Any, served: dict[str, Any] | None, label: str) -> dict[str, float]:
    """Log the parsed summary of the last LoadGen test (metrics, tag, loadgen.* params, artifacts);
    return its metrics. A test that wrote no summary logs nothing and returns {}."""
    if not served:
        return {}
    log_dir = Path(served["log_dir"])
    summary = log_dir / SUMMARY_FILE
    if not summary.exists():
        log.error("%s: LoadGen wrote no %s in %s", label, SUMMARY_FILE, log_dir)
        return {}
    parsed = parse_summary(summary)
    metrics = dict(parsed["metrics"])
    if served.get("steps"):  # what batching did: samples per inference step (1 in SingleStream)
        metrics["serve_batch_mean"] = served["samples"] / served["steps"]
    if served.get("samples"):  # what padding to serve.batch_sizes cost: padding per answered sample
        metrics["serve_padded_fraction"] = served.get("padding", 0) / served["samples"]
    run.metrics(metrics)
    run.params({f"loadgen.{k}": v for k, v in parsed["settings"].items()})
    estimates = served.get("estimates", {})
    run.params({f"serve.estimate.{k}": f"{v:.4g}" for k, v in estimates.items()})
    run.params({"serve.rows_per_sample": served.get("rows_per_sample", 1)})  # e.g. a user's candidates
    run.params(_step_sizes(served))
    run.tags({SERVE_VALID_TAG: parsed["valid"], SERVE_SCENARIO_TAG: parsed["scenario"]})
    if parsed["invalid_because"]:
        run.tags({SERVE_INVALID_TAG: parsed["invalid_because"][:500]})
    for name in (SUMMARY_FILE, DETAIL_FILE):
        if (log_dir / name).exists():
            run.artifact(log_dir / name, "loadgen")
    if served.get("search"):
        _record_search(run, served["search"], log_dir / "search")
    rate = next((f", {metrics[k]:.1f} {u}/s" for k, u in _RATES if k in metrics), "")
    why = f" ({parsed['invalid_because']})" if parsed["invalid_because"] else ""
    log.info(
        "%s: LoadGen %s %s%s: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms%s",
        label, parsed["scenario"], parsed["valid"], why, metrics.get("latency_p50_ms", float("nan")),
        metrics.get("latency_p90_ms", float("nan")), metrics.get("latency_p99_ms", float("nan")), rate,
    )  # fmt: skip
    return metrics


def _step_sizes(served: dict[str, Any]) -> dict[str, str]:
    """The batch sizes the inference step really ran at, in the warm-up and in LoadGen's test: each one a
    shape a compiling framework compiled, so a size outside serve.batch_sizes would show here."""
    join = lambda sizes: ",".join(map(str, sizes))  # noqa: E731
    return {
        "serve.warmup_sizes": join(served.get("warmup_sizes", [])),
        "serve.step_sizes": join(served.get("step_sizes", [])),
    }


def _record_search(run: Any, search: dict[str, Any], folder: Path) -> None:
    """Server's peak-rate search: the rate found (0 when no trial met the bound), each trial as a series
    (step = trial index), and each trial's LoadGen summary as an artifact."""
    run.metrics({"server_peak_qps": search["peak_qps"]})
    run.tags({"serve.search_found": "yes" if search["peak_qps"] > 0 else "no"})
    for i, trial in enumerate(search["trials"]):
        run.metrics({"search/target_qps": trial["qps"], "search/p99_ms": trial["p99_ms"]}, step=i)
        if (summary := folder / f"trial{i:02d}" / SUMMARY_FILE).exists():
            run.artifact(summary, f"loadgen/search/trial{i:02d}")
