"""The report's serving-latency section: mode=serve runs, one table per (model, scenario), LoadGen's own
figures as recorded (serving/summary.py), its verdict beside them. No framework is called faster here yet:
one LoadGen test per cell has no measured spread to gate a finding on (the throughput findings' rule)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from dlbench.report.analysis import SERVE
from dlbench.report.charts import FRAMEWORK_COLORS, _color, _save
from dlbench.report.load import JobRow
from dlbench.report.render import Block, Image, Table, fmt, fmt_throughput

# what MLPerf calls each scenario's result (its headline figure)
HEADLINE = {
    "single_stream": "p90 latency",
    "multi_stream": "p99 latency",
    "server": "samples/s with p99 under the bound",
    "offline": "samples/s",
}
_PERCENTILES = (
    ("p50", "p50"),
    ("p90", "p90"),
    ("p95", "p95"),
    ("p99", "p99"),
    ("p999", "p99.9"),
    ("max", "max"),
)


@dataclass
class LatencyAnalysis:
    """The newest finished serve run of each cell, grouped by (model, scenario)."""

    groups: dict[tuple[str, str], list[JobRow]] = field(default_factory=dict)

    @property
    def runs(self) -> list[JobRow]:
        return [j for rows in self.groups.values() for j in rows]


def analyze_latency(jobs: list[JobRow]) -> LatencyAnalysis:
    newest: dict[tuple, JobRow] = {}
    for j in sorted(jobs, key=lambda j: j.start_ms):
        if j.mode == SERVE and j.status == "FINISHED":
            cell = (
                j.model,
                j.serve.get("scenario"),
                j.framework,
                j.precision,
                j.execution,
                j.serve.get("max_batch"),
                j.serve.get("target_qps"),  # a Server sweep over rates: one row per rate
                j.machine,  # the same cell on two machines: two rows
            )
            newest[cell] = j
    out = LatencyAnalysis()
    for (model, scenario, *_), j in sorted(newest.items(), key=lambda kv: tuple(map(str, kv[0]))):
        out.groups.setdefault((model, scenario), []).append(j)
    return out


def _row(j: JobRow) -> list[str]:
    rate = j.metric("samples_per_s")
    rate_text = (
        f"{fmt_throughput(rate)} samples/s" if rate == rate else f"{fmt_throughput(j.metric('qps'))} q/s"
    )
    cells = [j.framework, j.precision_label, j.execution, j.serve.get("max_batch", "?")]
    cells += [fmt(j.metric(f"latency_{key}_ms"), ".2f") for key, _ in _PERCENTILES]
    return [*cells, rate_text, fmt(j.metric("serve_batch_mean"), ".2f"), j.serve.get("valid", "?")]


# the CDF's points: LoadGen's percentiles, its minimum at 0 and its maximum at 100
_CDF = (("min", 0.0), ("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p97", 97.0), ("p99", 99.0))
_CDF += (("p999", 99.9), ("max", 100.0))


def _finish(fig: Figure, ax: Any, xlabel: str, ylabel: str, title: str, path: Path) -> Path:
    """The serving charts' common frame: labels, title, grid and legend, then the file."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def cdf_chart(rows: list[JobRow], title: str, path: Path) -> Path | None:
    """Latency (ms, log scale) against the fraction of queries answered within it, one line per run,
    drawn through LoadGen's own percentiles; None when no run logged them."""
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    drawn = 0
    for i, j in enumerate(rows):
        points = [(j.metric(f"latency_{k}_ms"), q) for k, q in _CDF]
        points = [(x, q) for x, q in points if not math.isnan(x) and x > 0]
        if len(points) < 2:
            continue
        label = f"{j.framework} {j.precision} {j.execution}"
        ax.plot(
            *zip(*points, strict=True),
            marker="o",
            ms=3,
            label=label,
            color=_color(FRAMEWORK_COLORS, j.framework, i),
        )
        drawn += 1
    if not drawn:
        return None
    ax.set_xscale("log")
    return _finish(fig, ax, "latency (ms, LoadGen's percentiles)", "% of queries within", title, path)


def _number(text: str | None) -> float:
    try:
        return float(text) if text is not None else math.nan
    except ValueError:
        return math.nan


def qps_chart(rows: list[JobRow], title: str, path: Path) -> Path | None:
    """Server: p99 latency against the rate LoadGen offered (its target_qps), one line per framework,
    precision, execution mode and batching, with the p99 bound; None unless some line has two rates."""
    lines: dict[tuple, list[tuple[float, float]]] = {}
    bounds = set()
    for j in rows:
        qps, p99 = _number(j.serve.get("target_qps")), j.metric("latency_p99_ms")
        if not (math.isnan(qps) or math.isnan(p99)):
            key = (j.framework, j.precision, j.execution, j.serve.get("max_batch", "?"))
            lines.setdefault(key, []).append((qps, p99))
            bounds.add(_number(j.serve.get("target_latency_ns")) / 1e6)
    if not any(len(points) > 1 for points in lines.values()):
        return None
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    for i, (key, points) in enumerate(sorted(lines.items())):
        fw, precision, mode, batch = key
        ax.plot(*zip(*sorted(points), strict=True), marker="o", ms=3, label=f"{fw} {precision} {mode} b{batch}",
                color=_color(FRAMEWORK_COLORS, fw, i))  # fmt: skip
    for bound in sorted(b for b in bounds if not math.isnan(b)):
        ax.axhline(bound, color="grey", ls="--", lw=1, label=f"p99 bound {bound:g} ms")
    ax.set_yscale("log")
    return _finish(fig, ax, "offered rate (LoadGen's target_qps, queries/s)", "p99 latency (ms)", title, path)


def latency_blocks(analysis: LatencyAnalysis, out_dir: Path | None = None) -> list[Block]:
    """One block per (model, scenario): the percentile table per framework and execution mode, the
    latency CDF drawn through the percentiles and, for Server runs at several rates, p99 against the
    offered rate, when out_dir is given."""
    blocks = []
    for (model, scenario), rows in analysis.groups.items():
        block = Block(f"{model} serving, {scenario}")
        block.paragraphs.append(
            f"LoadGen's figures (ms; MLPerf's result for this scenario: {HEADLINE.get(scenario, '?')}); "
            "LoadGen = its VALID/INVALID verdict (minimum duration, query count, latency bound, early "
            "stopping). One test per cell: no finding is drawn without a measured spread."
        )
        headers = ["framework", "precision", "execution", "max batch"]
        headers += [name for _, name in _PERCENTILES] + ["rate", "batch mean", "LoadGen"]
        table = [_row(j) for j in rows]
        if len({j.machine for j in rows}) > 1:  # never two machines' rows side by side unnamed
            headers.append("machine")
            table = [[*cells, j.machine or "?"] for cells, j in zip(table, rows, strict=True)]
        block.tables.append(Table(f"latency-{model}-{scenario}", "latency", headers, table))
        title = f"{model} {scenario}: latency CDF"
        if out_dir and (png := cdf_chart(rows, title, out_dir / f"latency-{model}-{scenario}.png")):
            block.images.append(Image(png, title))
        title = f"{model} Server: p99 against the offered rate"
        if out_dir and scenario == "server" and (png := qps_chart(rows, title, out_dir / f"qps-{model}.png")):
            block.images.append(Image(png, title))
        blocks.append(block)
    return blocks
