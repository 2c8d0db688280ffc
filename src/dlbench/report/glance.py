"""The report's "At a glance" section: the figure a reader quotes, laid out as a framework comparison is read.

One table per model and mode (and variant): a row per precision, a column per framework and execution mode,
compiled columns first, then eager/graph ones, each cell the median throughput with the energy per sample
beside it. It repeats what the per-group tables hold, side by side: it draws no conclusion itself (the
findings do, within one execution class), and its paragraph says which columns may be compared.
"""

from __future__ import annotations

from dlbench.core.execution import COMPILED, UNCOMPILED, execution_class
from dlbench.report.analysis import (
    FRAMEWORK_ORDER,
    HOST_BOUND_UTIL,
    PRECISION_ORDER,
    Analysis,
    Group,
    few_samples,
    host_bound,
    in_order,
    noisy,
)
from dlbench.report.load import JobRow
from dlbench.report.render import DASH, DIVERGED, FEW, FLAG, HOST, Block, Table, fmt, fmt_throughput

CLASS_ORDER = (COMPILED, UNCOMPILED)


def _column(job: JobRow) -> tuple[int, int, str, str]:
    """Sort key of a job's column: compiled class first, the article's framework order, then the mode."""
    fw = job.framework
    rank = FRAMEWORK_ORDER.index(fw) if fw in FRAMEWORK_ORDER else len(FRAMEWORK_ORDER)
    return CLASS_ORDER.index(execution_class(job.execution)), rank, fw, job.execution


def _label(column: tuple[int, int, str, str]) -> str:
    return f"{column[2]} ({column[3]})"


def scale(values: list[float], units: tuple[tuple[float, str], ...]) -> tuple[float, str]:
    """The factor and prefix that put a table's largest value in a readable range: 619,381,300 samples/s
    reads 619.4 M, 1.11e-06 J reads 1.11 µJ. `units` runs from the largest factor down."""
    top = max((v for v in values if v == v), default=0.0)  # NaN-free
    return next(((f, name) for f, name in units if top >= f), units[-1])


RATES = ((1e9, "G"), (1e6, "M"), (1.0, ""))
ENERGIES = ((1.0, "J"), (1e-3, "mJ"), (1e-6, "µJ"), (1e-9, "nJ"))


def _cell(job: JobRow, rate: tuple[float, str], energy: tuple[float, str]) -> str:
    """Throughput, then the energy per sample where measured, in the table's units; a mark where the figure
    proves nothing (a diverged loss, a shared or throttling GPU), † where the energy rests on too few
    samples, and ◔ where the GPU waited on its host: a column's lead there is the host's dispatch."""
    tput = job.metric("throughput") / rate[0]
    text = fmt(tput, ",.1f") if rate[1] else fmt_throughput(tput)  # the table's title names the unit
    joules = job.metric("energy_j_per_sample")
    if joules == joules:  # not NaN
        text += f" · {_three(joules / energy[0])}" + (f" {FEW}" if few_samples(job) else "")
    if job.loss_flag:
        text += f" {FLAG} {DIVERGED}"
    elif noisy(job):
        text += f" {FLAG}"
    if host_bound(job):
        text += f" {HOST}"
    return text


def _three(x: float) -> str:
    """Three significant digits with their trailing zeros: 0.939, 1.20, 12.0, 939."""
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"


def _tables(analysis: Analysis) -> dict[tuple[str, str, str], list[Group]]:
    """The groups of one model, mode and variant together, whatever their execution class."""
    out: dict[tuple[str, str, str], list[Group]] = {}
    for g in analysis.groups:
        out.setdefault((g.model, g.mode, g.variant), []).append(g)
    return out


def glance_block(analysis: Analysis) -> Block | None:
    """The "At a glance" section, or None when no table compares two frameworks or execution modes."""
    tables: list[Table] = []
    classes: dict[str, set[str]] = {COMPILED: set(), UNCOMPILED: set()}
    for (model, mode, variant), groups in sorted(_tables(analysis).items()):
        jobs = [e.job for g in groups for e in g.entries]
        columns = sorted({_column(j) for j in jobs})
        if len(columns) < 2:
            continue
        for column in columns:
            classes[CLASS_ORDER[column[0]]].add(_label(column))
        cells = {(j.precision, _column(j)): j for j in jobs}
        rate = scale([j.metric("throughput") for j in jobs], RATES)
        energy = scale([j.metric("energy_j_per_sample") for j in jobs], ENERGIES)
        rows = [
            [p] + [_cell(cells[(p, c)], rate, energy) if (p, c) in cells else DASH for c in columns]
            for p in in_order([j.precision for j in jobs], PRECISION_ORDER)
        ]
        unit = groups[0].unit
        units = f"{rate[1]} {unit}/s".strip() + f" · {energy[1]} per {unit.removesuffix('s')}"
        title = f"{model} {mode}" + (f" ({variant})" if variant else "") + f": {units}"
        slug = "".join(ch if ch.isalnum() else "-" for ch in f"{model}-{mode}-{variant}").strip("-").lower()
        tables.append(
            Table(f"glance-{slug}", "dlbench-table glance", [title] + [_label(c) for c in columns], rows)
        )
    if not tables:
        return None
    b = Block("At a glance")
    named = [f"{cls}: {', '.join(sorted(classes[cls]))}" for cls in CLASS_ORDER if classes[cls]]
    b.paragraphs.append(
        "Median throughput per framework and execution mode, one row per precision, with the energy per "
        "sample where the GPU's power was read (each table names its units). Compare columns within one "
        f"class only ({'; '.join(named)}); the findings above state only differences beyond the measured "
        f"spread. {FLAG}: the figure proves nothing (a diverged loss, a shared or throttling GPU); {FEW}: the "
        f"energy rests on too few telemetry samples; {HOST}: the GPU was busy less than "
        f"{HOST_BOUND_UTIL:.0f}% of the timed phase, waiting on its host; {DASH}: not run."
    )
    b.tables = tables
    return b
