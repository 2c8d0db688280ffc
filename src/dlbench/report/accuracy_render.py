"""The Accuracy section as report blocks: the rule, the verdicts, and per task a table and a chart of
the held-out metric per epoch (mean over seeds, shaded from the lowest to the highest seed)."""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from dlbench.report.accuracy import VERDICT_RULE, AccuracyAnalysis, Cell, Task
from dlbench.report.charts import FRAMEWORK_COLORS, OTHER_COLORS, _save
from dlbench.report.render import DASH, FLAG, Block, Image, Table, fmt, fmt_throughput

LINESTYLES = {"fp32": "-", "tf32": "-.", "amp": "--", "bf16": ":"}


def _metric(x: float) -> str:
    return fmt(x, ".4f")


def _final(cell: Cell) -> str:
    if not cell.finals:
        return DASH
    return _metric(cell.mean) + (f" ± {cell.std:.4f}" if len(cell.finals) >= 2 else "")


def _range(cell: Cell) -> str:
    lo, hi = cell.range
    return DASH if len(cell.finals) < 2 else f"{lo:.4f}–{hi:.4f}"


def _seeds(cell: Cell) -> str:
    dup = f"; seed {', '.join(cell.duplicates)} more than once" if cell.duplicates else ""
    return f"{len(cell.runs)} ({', '.join(cell.seeds)}{dup})"


def _to_target(cell: Cell, task: Task, key: str, spec: str) -> str:
    if math.isnan(task.target):
        return DASH
    reached = cell.reached
    count = f"{len(reached)}/{len(cell.runs)}"
    return (
        f"{fmt(cell.mean_of(key, reached), spec)} ({count})"
        if reached
        else f"not reached (0/{len(cell.runs)})"
    )


def _flag(cell: Cell) -> str:
    if not cell.flagged:
        return ""
    return f"{FLAG} {len(cell.flagged)} of {len(cell.runs)} seeds NaN/inf"


def accuracy_table(task: Task) -> Table:
    target = DASH if math.isnan(task.target) else f"{task.target:g}"
    unit = next((c.runs[0].unit for c in task.cells if c.runs), "samples")  # e.g. target tokens
    headers = [
        "framework",
        "precision",
        "seeds",
        f"final {task.metric} (mean ± std)",
        "seed range",
        f"best {task.metric}",
        f"epochs to {target}",
        f"time to {target} (s)",
        "train time (s)",
        f"train throughput ({unit}/s)",
        "flag",
    ]
    rows = [
        [
            c.framework,
            c.precision_text,
            _seeds(c),
            _final(c),
            _range(c),
            _metric(c.mean_of("eval_best")),
            _to_target(c, task, "epochs_to_target", ".1f"),
            _to_target(c, task, "time_to_target_s", ".1f"),
            fmt(c.mean_of("train_s"), ".1f"),
            fmt_throughput(c.mean_of("throughput")),
            _flag(c),
        ]
        for c in task.cells
    ]
    return Table(f"table-{task.slug}", "dlbench-table accuracy", headers, rows)


def curve_chart(task: Task, curves: dict[str, list[tuple[int, float]]], path: Path) -> Path | None:
    """Held-out metric per epoch: a line per framework x precision (mean over its sound seeds), shaded
    between the lowest and highest seed; None when no run of the task logged a curve."""
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    drawn = 0
    for i, cell in enumerate(task.cells):
        per_epoch: dict[int, list[float]] = {}
        for job in cell.sound:
            for epoch, value in curves.get(job.run_id, []):
                if math.isfinite(value):
                    per_epoch.setdefault(epoch, []).append(value)
        if not per_epoch:
            continue
        epochs = sorted(per_epoch)
        color = FRAMEWORK_COLORS.get(cell.framework, OTHER_COLORS[i % len(OTHER_COLORS)])
        mean = [sum(per_epoch[e]) / len(per_epoch[e]) for e in epochs]
        label = f"{cell.framework} {cell.precision_text}" + (
            f" ({FLAG} {len(cell.flagged)} diverged)" if cell.flagged else ""
        )
        ax.plot(
            epochs,
            mean,
            LINESTYLES.get(cell.precision, "-"),
            color=color,
            marker="o",
            markersize=3,
            label=label,
        )
        ax.fill_between(epochs, [min(per_epoch[e]) for e in epochs], [max(per_epoch[e]) for e in epochs],
                        color=color, alpha=0.12, linewidth=0)  # fmt: skip
        drawn += 1
    if not drawn:
        return None
    if not math.isnan(task.target):
        ax.axhline(task.target, color="black", linestyle=":", linewidth=1, label=f"target {task.target:g}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"held-out {task.metric}")
    ax.set_title(f"{task.title} per epoch\nline: mean over seeds; band: lowest to highest seed", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def accuracy_blocks(
    analysis: AccuracyAnalysis, curves: dict[str, list[tuple[int, float]]], out_dir: Path
) -> tuple[list[Block], list[Path]]:
    """The "Accuracy" heading with the rule and verdicts, then one sub-block per task."""
    if not analysis.tasks:
        return [], []
    head = Block("Accuracy", paragraphs=[f"Rule: {VERDICT_RULE}"], bullets_id="accuracy-verdicts")
    order = {
        "worse": 0,
        "better": 1,
        "diverged": 2,
        "duplicates": 3,
        "inconclusive": 4,
        "matches": 5,
        "no-spread": 6,
    }
    head.bullets = [v.text for v in sorted(analysis.verdicts, key=lambda v: order[v.kind])]
    if not analysis.verdicts:
        head.paragraphs.append("No reduced precision was run beside fp32, so there is no verdict.")
    if analysis.has_flagged:
        head.paragraphs.append(
            f"{FLAG} marks seeds whose loss or held-out metric was NaN or inf (a diverged training): they "
            "are left out of the means and their configuration is never reported as a match."
        )
    blocks, images = [head], []
    for task in analysis.tasks:
        block = Block(task.title, level=3, tables=[accuracy_table(task)])
        if (png := curve_chart(task, curves, out_dir / f"{task.slug}.png")) is not None:
            images.append(png)
            block.images.append(Image(png, f"{task.metric} per epoch: {task.title}"))
        blocks.append(block)
    return blocks, images
