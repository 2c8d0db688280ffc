"""The report's serving-latency section: mode=serve runs, one table per (model, scenario), LoadGen's own
figures as recorded (serving/summary.py), its verdict beside them. No framework is called faster here yet:
one LoadGen test per cell has no measured spread to gate a finding on (the throughput findings' rule)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dlbench.report.analysis import SERVE
from dlbench.report.load import JobRow
from dlbench.report.render import Block, Table, fmt, fmt_throughput

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


def latency_blocks(analysis: LatencyAnalysis) -> list[Block]:
    """One block per (model, scenario): the percentile table per framework and execution mode."""
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
        block.tables.append(Table(f"latency-{model}-{scenario}", "latency", headers, [_row(j) for j in rows]))
        blocks.append(block)
    return blocks
