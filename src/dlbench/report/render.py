"""Write the analysis as report.md (tables, sentences, image links) and report.html (one self-contained
page: inline CSS, PNGs as base64 data URIs, tables as real <table> elements with ids).

Both documents are built from the same `Document` (a list of blocks) so they never disagree.
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field
from pathlib import Path

from dlbench.core.names import SPREAD_LIMIT
from dlbench.report.analysis import RULE, Analysis, Group, few_samples, flagged
from dlbench.report.load import JobRow
from dlbench.telemetry.sampler import MIN_TIMED_SAMPLES

DASH = "–"  # shown for a metric the run did not log (e.g. GPU metrics of a CPU run)
FLAG = "⚠"
DIVERGED = "loss NaN"
SHARED = "GPU shared"
REUSED = "(reused)"
FEW = "†"  # a mean over fewer telemetry samples than MIN_TIMED_SAMPLES
HOST = "◔"  # the GPU sat idle much of the timed phase, waiting on its host (analysis.host_bound)


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def fmt_throughput(x: float) -> str:
    """Three significant digits, no exponent: 0.123, 12.3, 1,234."""
    if _missing(x):
        return DASH
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:#.3g}"


def fmt(x: float, spec: str, suffix: str = "") -> str:
    return DASH if _missing(x) else f"{x:{spec}}{suffix}"


@dataclass
class Table:
    id: str
    css_class: str
    headers: list[str]
    rows: list[list[str]]


@dataclass
class Image:
    path: Path
    alt: str


@dataclass
class Block:
    """One section: a heading, then paragraphs, bullet items, tables and images, in that order."""

    heading: str
    level: int = 2
    paragraphs: list[str] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    bullets_id: str | None = None
    tables: list[Table] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)


def result_table(group: Group, show_spread: bool) -> Table:
    """The per-(model, mode) table as text cells; '–' wherever a metric was not logged."""
    unit = group.unit
    headers = ["framework", "execution", "precision", f"throughput ({unit}/s)", "p5–p95"]
    if show_spread:
        headers.append("repeat spread")
    headers += [
        "× fp32",
        "× fastest framework",
        "GPU util",
        "GPU mem peak (MiB)",
        "framework mem peak (MiB)",
        "CPU util",
        f"energy (J/{unit.removesuffix('s')})",
        "warm-up (s)",
        "CPU threads",
    ]
    rows = []
    for e in group.entries:
        j = e.job
        p05, p95 = j.metric("throughput_p05"), j.metric("throughput_p95")
        marks = [DIVERGED] if j.loss_flag else []
        marks += ([SHARED] if j.gpu_flag else []) + ([j.clock_flag] if j.clock_flag else [])
        suffix = "".join(f" {FLAG} {m}" for m in marks)
        framework = f"{j.framework} {REUSED}" if j.reused else j.framework
        row = [framework, j.execution, j.precision_label, fmt_throughput(j.metric("throughput")) + suffix]
        row.append(DASH if _missing(p05) or _missing(p95) else f"{fmt_throughput(p05)}–{fmt_throughput(p95)}")
        if show_spread:
            spread = j.metric("throughput_spread")
            cell = DASH if _missing(spread) else f"{spread * 100:.1f}% ({j.repeats}×)"
            row.append(cell + (f" {FLAG}" if flagged(j) else ""))
        few = few_samples(j)
        row += [
            fmt(e.speedup, ".2f", "×"),
            fmt(e.rel_fastest, ".2f", "×"),
            _marked(fmt(j.metric("gpu_util_mean"), ".0f", "%"), few),
            fmt(j.metric("gpu_mem_used_mib_max"), ",.0f"),
            fmt(j.metric("framework_mem_mib_max"), ",.0f"),
            _marked(fmt(j.metric("cpu_util_mean"), ".0f", "%"), few),
            _marked(fmt(j.metric("energy_j_per_sample"), "#.3g"), few),
            fmt(j.metric("warmup_s"), ".2f"),
            j.threads or DASH,
        ]
        rows.append(row)
    return Table(f"table-{group.slug}", "dlbench-table results", headers, rows)


def _marked(cell: str, few: bool) -> str:
    """A mean's cell, with FEW when it rests on too few telemetry samples (a dash stays a dash)."""
    return f"{cell} {FEW}" if few and cell != DASH else cell


def failed_table(jobs: list[JobRow]) -> Table:
    """The runs that logged no throughput and no newer run of their configuration replaced, with the execution
    mode: a framework's graph-mode failure is not its XLA cell's."""
    headers = [
        "run", "framework", "execution", "model", "precision", "mode", "status", "failure", "message", "run id",
    ]  # fmt: skip
    rows = [
        [
            j.run_name,
            j.framework,
            j.execution,
            j.model,
            j.precision,
            j.mode,
            j.status,
            j.failure or ("no throughput logged" if j.status == "FINISHED" else DASH),
            j.failure_message or DASH,
            j.run_id,
        ]
        for j in jobs
    ]
    return Table("failed-runs", "dlbench-table failed", headers, rows)


# ---- Markdown ------------------------------------------------------------------------------------
def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(title: str, blocks: list[Block]) -> str:
    out = [f"# {title}", ""]
    for b in blocks:
        out += [f"{'#' * b.level} {b.heading}", ""]
        for p in b.paragraphs:
            out += [p, ""]
        if b.bullets:
            out += [f"- {x}" for x in b.bullets] + [""]
        for t in b.tables:
            out.append("| " + " | ".join(_md_cell(h) for h in t.headers) + " |")
            out.append("|" + "|".join("---" for _ in t.headers) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
            out.append("")
        for img in b.images:
            out += [f"![{img.alt}]({img.path.name})", ""]
    return "\n".join(out)


# ---- HTML ----------------------------------------------------------------------------------------
CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px auto;
       max-width: 1200px; padding: 0 16px; color: #1f2328; background: #fff; }
h1 { font-size: 1.6em; border-bottom: 2px solid #d0d7de; padding-bottom: 6px; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
p.meta, p.note { color: #57606a; font-size: 0.9em; }
table.dlbench-table { border-collapse: collapse; margin: 12px 0; font-size: 0.85em; }
table.dlbench-table th, table.dlbench-table td { border: 1px solid #d0d7de; padding: 4px 8px; }
table.dlbench-table th { background: #f0f3f6; text-align: left; }
table.dlbench-table td { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.dlbench-table td:nth-child(-n+2) { text-align: left; }
table.failed td { text-align: left; }
table.dlbench-table tr:nth-child(even) td { background: #f8fafc; }
ul#findings li { margin: 4px 0; }
figure { margin: 12px 0; }
figure img { max-width: 100%; border: 1px solid #eaeef2; }
code { background: #f0f3f6; padding: 1px 4px; border-radius: 3px; }
"""


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _inline_code(text: str) -> str:
    """Escape, then turn `code` spans into <code> (the only Markdown the paragraphs use)."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(title: str, blocks: list[Block]) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{CSS}</style>",
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    for b in blocks:
        out.append(f"<h{b.level}>{html.escape(b.heading)}</h{b.level}>")
        for p in b.paragraphs:
            out.append(f'<p class="note">{_inline_code(p)}</p>')
        if b.bullets:
            ul_id = f' id="{b.bullets_id}"' if b.bullets_id else ""
            out.append(f"<ul{ul_id}>" + "".join(f"<li>{_inline_code(x)}</li>" for x in b.bullets) + "</ul>")
        for t in b.tables:
            out.append(f'<table id="{t.id}" class="{t.css_class}">')
            out.append(
                "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in t.headers) + "</tr></thead>"
            )
            out.append("<tbody>")
            out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in t.rows]
            out.append("</tbody></table>")
        for img in b.images:
            out.append(
                f'<figure><img src="{_data_uri(img.path)}" alt="{html.escape(img.alt)}">'
                f"<figcaption>{html.escape(img.alt)}</figcaption></figure>"
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def findings_block(analysis: Analysis) -> Block:
    claims = [f.text for f in analysis.findings if f.kind != "tie"]
    ties = [f.text for f in analysis.findings if f.kind == "tie"]
    block = Block("Findings", paragraphs=[f"Rule: {RULE}"], bullets_id="findings")
    block.bullets = claims + ties
    if not claims:
        block.paragraphs.append("No difference in these runs exceeds the measured spread.")
    if analysis.has_diverged:
        block.paragraphs.append(
            f"{FLAG} {DIVERGED} marks a job whose loss was NaN or inf at the end (`dlbench.loss_flag`): the "
            "training diverged, so its throughput is not a training measurement; it is left out of the findings."
        )
    if analysis.has_noisy:
        block.paragraphs.append(
            f"{FLAG} {SHARED} marks a job during which another process used the GPU (`dlbench.gpu_flag`); "
            f"{FLAG} throttled / clock-drop a timed phase in which the GPU throttled or its SM clock fell by "
            "more than 10% (`dlbench.clock_flag`). Their numbers may be low for reasons that are not the "
            "framework's; they are left out of the findings."
        )
    if analysis.reused:
        block.paragraphs.append(
            f"{REUSED} marks a job this sweep did not run: with resume=true it reused a FINISHED run of the "
            "same configuration from an earlier sweep (`dlbench.reused_by`)."
        )
    if analysis.has_few_samples:
        block.paragraphs.append(
            f"{FEW} marks a utilization or energy figure from fewer than {MIN_TIMED_SAMPLES} telemetry samples "
            "in the job's timed phase (`telemetry_samples`): NVML's utilization is the busy fraction of the "
            "last 1/6–1 s, so over so short a phase these figures mostly describe the warm-up before it. "
            "Lengthen the timed phase (schedule.min_timed_s=5, in seconds) to measure them."
        )
    if analysis.has_spread:
        block.paragraphs.append(
            f"{FLAG} marks a job whose repeats disagreed by more than {SPREAD_LIMIT:.0%} "
            "(`dlbench.spread_flag=high`): rerun it on a quieter machine before trusting its number."
        )
    return block
