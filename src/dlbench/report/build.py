"""Build a report end to end: select the runs, analyze them, draw the charts, write Markdown and HTML."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mlflow.tracking import MlflowClient

from dlbench.core.names import NOT_RUN_PREFIX, OVERRIDES_TAG
from dlbench.core.secrets import mask
from dlbench.report import charts
from dlbench.report.accuracy import AccuracyAnalysis, analyze_accuracy, load_curves
from dlbench.report.accuracy_render import accuracy_blocks
from dlbench.report.analysis import Analysis, analyze
from dlbench.report.claims import claims_blocks
from dlbench.report.equivalence import Margins
from dlbench.report.glance import glance_block
from dlbench.report.latency import LatencyAnalysis, analyze_latency, latency_blocks
from dlbench.report.load import (
    History,
    JobRow,
    ReportInputError,
    Selection,
    list_hint,
    load_history,
    select,
    select_stores,
)
from dlbench.report.render import (
    DASH,
    Block,
    Image,
    Table,
    failed_table,
    findings_block,
    result_table,
    to_html,
    to_markdown,
)
from dlbench.report.scaling import scaling_block

MARKDOWN = "report.md"
HTML = "report.html"
CSV = "report.csv"  # every throughput row of the tables, with its framework and execution columns


@dataclass
class Report:
    """What was written, and the analysis behind it (tests and callers read the numbers from it)."""

    out_dir: Path
    markdown: Path
    html: Path
    csv: Path
    images: list[Path]
    selection: Selection
    analysis: Analysis
    accuracy: AccuracyAnalysis
    latency: LatencyAnalysis | None = None

    @property
    def files(self) -> list[Path]:
        return [self.markdown, self.html, self.csv, *self.images]

    @property
    def finished(self) -> int:
        return finished_jobs(self.analysis, self.accuracy, self.latency)


def finished_jobs(analysis: Analysis, accuracy: AccuracyAnalysis, latency: LatencyAnalysis | None) -> int:
    """Finished jobs of every kind: throughput rows, accuracy runs and serving runs (the latter two have
    their own sections, not the throughput tables)."""
    return len(analysis.finished) + len(accuracy.runs) + (len(latency.runs) if latency else 0)


def build_report(
    client: MlflowClient,
    uri: str,
    out_dir: Path,
    run_id: str | None = None,
    experiment: str | None = None,
    require_finished: bool = True,
    margins: Margins | None = None,
    parent_status: str | None = None,
    also: dict[str, MlflowClient] | None = None,
) -> Report:
    """Write report.md, report.html and the PNGs into out_dir for a sweep (run_id = its parent run),
    an experiment, or by default the latest sweep of the `dlbench` experiment.

    `margins` sets the accuracy verdicts' δ (report.equivalence, report.delta).
    require_finished=False still writes a report when every job failed (the sweep hook wants the
    failures on record); the CLI treats "nothing finished" as bad input. parent_status: the status the
    sweep's parent is about to get (the sweep reports before it closes its parent, still RUNNING).
    also: further stores (URI -> client) whose runs of the same experiment join the report: one page for
    sittings kept in separate stores. A sweep's parent run lives in one store, so not with run_id.
    """
    clients = {uri: client} | (also or {})
    if len(clients) > 1 and run_id:
        raise ReportInputError(
            "a sweep's run id belongs to one store: give one --uri with --run, or --experiment NAME to "
            "combine the stores"
        )
    if len(clients) > 1:
        selection = select_stores(clients, experiment)
    else:
        selection = select(client, uri, run_id=run_id, experiment=experiment)
    analysis = analyze(selection.jobs)
    accuracy = analyze_accuracy(selection.jobs, margins)
    latency = analyze_latency(selection.jobs)
    if require_finished and not analysis.groups and not accuracy.tasks and not latency.groups:
        statuses = Counter(j.status for j in selection.jobs)
        what = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "none"
        raise ReportInputError(
            f"{_subject(selection)} has no finished runs with a throughput (runs: {what}); "
            f"list what exists with: {list_hint(uri)}"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    histories: dict[str, History] = {}
    for job in analysis.finished:
        if (h := load_history(clients[job.store], job.run_id, job.start_ms)) is not None:
            histories[job.run_id] = h

    blocks = [_overview(selection, analysis, accuracy, latency, parent_status)]
    if analysis.groups:
        blocks.append(findings_block(analysis))
    if glance := glance_block(analysis):  # the comparison side by side, before each table's details
        blocks.append(glance)
    if scaling := scaling_block(analysis):  # only when a run used several devices
        blocks.append(scaling)
    accuracy_section, images = accuracy_blocks(accuracy, load_curves(clients, accuracy), out_dir)
    blocks += accuracy_section
    latency_section = latency_blocks(latency, out_dir)
    images += [image.path for block in latency_section for image in block.images]
    blocks += latency_section
    for g in analysis.groups:
        block = Block(g.title, tables=[result_table(g, analysis.has_spread)])
        block.paragraphs.append(_table_note(analysis))
        for kind, draw in (
            ("throughput", lambda p, g=g: charts.throughput_chart(g, p)),
            ("memory", lambda p, g=g: charts.memory_chart(g, p)),
            ("utilization", lambda p, g=g: charts.utilization_chart(g, histories, p)),
        ):
            if (png := draw(out_dir / f"{kind}-{g.slug}.png")) is not None:
                images.append(png)
                block.images.append(Image(png, f"{kind}: {g.title}"))
        blocks.append(block)
    if (png := charts.speedup_chart(analysis, out_dir / "speedup.png")) is not None:
        images.append(png)
        blocks.append(Block("Reduced precision vs fp32", images=[Image(png, "speed-up over fp32")]))
    if analysis.groups or accuracy.tasks:  # after the tables: the article's conclusions, tested on them
        blocks += claims_blocks(analysis, accuracy)
    failed = Block("Failed runs")
    if analysis.failed:
        failed.tables.append(failed_table(analysis.failed))
    else:
        failed.paragraphs.append("None.")
    blocks.append(failed)
    if not_run := not_run_block(selection):
        blocks.append(not_run)

    title = selection.title
    md = out_dir / MARKDOWN
    md.write_text(mask(to_markdown(title, blocks)), encoding="utf-8")  # the store URI may hold a password
    page = out_dir / HTML
    page.write_text(mask(to_html(title, blocks)), encoding="utf-8")
    table = out_dir / CSV
    table.write_text(_csv(analysis), encoding="utf-8")
    return Report(out_dir, md, page, table, images, selection, analysis, accuracy, latency)


def _csv(analysis: Analysis) -> str:
    """The throughput tables as one CSV: model, mode and variant first, then framework, execution (eager,
    graph, xla, jit, torch.compile(mode), hybridized), precision and the measured columns."""
    frame = analysis.frame()
    if frame.empty:
        return ""
    first = ["model", "mode", "variant", "framework", "execution", "precision"]
    return frame[first + [c for c in frame.columns if c not in first]].to_csv(index=False)


def not_run_block(sel: Selection) -> Block | None:
    """The cells this sweep asked for that its machine cannot run (tracking.sweep.record_not_run), each with
    its reason: skipped, not failed."""
    cells = sorted(v for k, v in sel.parent_tags.items() if k.startswith(NOT_RUN_PREFIX))
    if not cells:  # also when the report covers an experiment, not one sweep (no parent tags)
        return None
    rows = [list(c.split(": ", 1)) if ": " in c else [c, DASH] for c in cells]
    b = Block("Not run on this machine")
    b.paragraphs.append(
        "Cells this machine's hardware cannot run, skipped before a run was made (not failures); each with "
        "the reason dlbench found."
    )
    b.tables.append(Table("not-run", "dlbench-table not-run", ["cell", "reason"], rows))
    return b


def machine_lines(jobs: list[JobRow]) -> list[str]:
    """One line per machine the runs measured on: its host facts and the dlbench commits that ran there.
    Runs of different machines sit in tables of their own (load.MACHINE_KEY), so a reader needs each."""
    by_machine: dict[str, list[JobRow]] = {}
    for j in jobs:
        if j.host:
            by_machine.setdefault(j.machine or "?", []).append(j)
    lines = []
    for machine, members in by_machine.items():
        host = members[0].host
        commits = sorted({_short_commit(j.host.get("git_commit", "?")) for j in members})
        hosts = sorted({j.host.get("host", "?") for j in members})
        line = (
            f"Host {', '.join(hosts)}: {host.get('cpu', '?')}, {host.get('cpu_count', '?')} CPUs, "
            f"{host.get('mem_total_gib', '?')} GiB; git {', '.join(commits)}"
        )
        several = len(by_machine) > 1
        lines.append(f"Machine `{machine}` ({len(members)} runs). {line}" if several else line)
    return lines


def _short_commit(commit: str) -> str:
    """The commit in 12 hex digits, its "+dirty" kept: runs of a modified tree must not pass for the commit."""
    sha, dirty, _ = commit.partition("+dirty")
    return sha[:12] + dirty


def _not_run_count(sel: Selection) -> int:
    return sum(k.startswith(NOT_RUN_PREFIX) for k in sel.parent_tags)


def _subject(sel: Selection) -> str:
    if sel.parent is not None:
        return f"sweep run '{sel.parent.info.run_id}'"
    return f"experiment '{sel.experiment_name}'" + (
        f" in {len(sel.stores)} stores" if len(sel.stores) > 1 else ""
    )


def _table_note(analysis: Analysis) -> str:
    note = (
        "Throughput: median of the timed windows, in the unit each table names (images/s, target tokens/s, "
        "samples/s). Precision: as configured, with the compute dtype verified on real layer outputs. "
        "× fp32: over the same framework at fp32. "
        "× fastest framework: over the fastest framework at the same precision. "
        "CPU threads: intra-op/inter-op threads the framework reported using; runs are compared only at "
        "equal counts. "
        f"{DASH}: not measured"
    )
    if not analysis.has_gpu:
        return note + " (no GPU telemetry in these runs: CPU only)."
    # the two memory columns cover different spans: a reader seeing the allocator above NVML needs to know why
    return note + (
        ". GPU mem peak: NVML over the timed phase. Framework mem peak: the allocator's peak over the whole job,"
        " warm-up included, so autotuning's trial workspaces (cuDNN's benchmark, for one) can count and lift it"
        " above the GPU's figure."
    )


def _overview(
    sel: Selection,
    analysis: Analysis,
    accuracy: AccuracyAnalysis,
    latency: LatencyAnalysis,
    status: str | None,
) -> Block:
    b = Block("Overview")
    when = min((j.start_ms for j in sel.jobs), default=0)
    started = dt.datetime.fromtimestamp(when / 1000).strftime("%Y-%m-%d %H:%M") if when else DASH
    if len(sel.stores) > 1:
        counts = Counter(j.store for j in sel.jobs)
        stores = "; ".join(f"`{u}` ({counts[u]} runs)" for u in sel.stores)
        b.bullets.append(f"Stores {stores}; experiment `{sel.experiment_name}` in each")
    else:
        b.bullets.append(f"Store `{sel.uri}`, experiment `{sel.experiment_name}` (id {sel.experiment_id})")
    if sel.parent is not None:
        tags = sel.parent_tags
        b.bullets.append(
            f"Sweep parent run `{sel.parent.info.run_id}` ({status or sel.parent.info.status}), started {started}"
        )
        if tags.get(OVERRIDES_TAG):
            b.bullets.append(f"Overrides: `{tags[OVERRIDES_TAG]}`")
    else:
        b.bullets.append(
            f"All job runs of the experiment (the newest run of each configuration), first {started}"
        )
    b.bullets.extend(machine_lines(sel.jobs))
    gpus = sorted({j.gpu_name for j in sel.jobs if j.gpu_name})
    devices = sorted({j.device for j in sel.jobs if j.device})
    b.bullets.append(f"GPU: {', '.join(gpus) or 'none recorded'}; devices used: {', '.join(devices) or DASH}")
    failed = len(analysis.failed)
    b.bullets.append(
        f"Jobs: {finished_jobs(analysis, accuracy, latency)} finished"
        + (f" ({analysis.reused} reused from earlier sweeps, resume=true)" if analysis.reused else "")
        + f", {failed} failed or unfinished"
        + (f", {analysis.hidden} older duplicate runs not shown" if analysis.hidden else "")
        + (f", {n} not run on this machine (listed below)" if (n := _not_run_count(sel)) else "")
    )
    b.bullets.extend(analysis.notes)
    return b
