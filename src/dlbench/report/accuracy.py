"""The Accuracy section's numbers: `mode=converge` runs grouped by task, framework and precision, over seeds.

A task (model x dataset x metric) gets one table and one chart. A cell holds the runs of one framework
and one precision as it really ran (the verified `precision.*` tags: compute dtype, autocast or a pure
reduced-precision network, loss scaling), one run per seed: the mean and sample standard deviation of
the final held-out metric, the best value, epochs and wall time to `schedule.target`, and throughput.

Verdicts are statistical statements (report/equivalence.py): the Welch 95% interval of the difference
from fp32 of the same framework, read against an equivalence margin δ. A cell with fewer than two seeds
gets no verdict. A run whose loss or metric was NaN or inf is flagged: it is shown, counted apart, and a
cell holding one is never reported as a match. A rerun of one configuration and seed supersedes the older
run; runs of one seed whose configurations differ otherwise are listed, never silently replaced.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field

from mlflow.tracking import MlflowClient

from dlbench.report.analysis import BASELINE, CONVERGE, FRAMEWORK_ORDER, PRECISION_ORDER
from dlbench.report.equivalence import LEVEL, Margins, classify, seeds_to_settle, welch_interval
from dlbench.report.load import JobRow
from dlbench.workloads.registry import fraction_metrics

VERDICT_RULE = (
    "Final metric: mean ± sample standard deviation over seeds (one run per seed; each seed fixes data "
    "order and augmentation, identical across frameworks, and the initial weights: the same numbers in "
    "every framework where the model draws them from the seed, else the framework's own RNG seeded, as "
    "each run's tag run.init says). A precision is named by what ran (verified compute dtype, mixed = "
    f"autocast with float32 weights, pure = the whole network in that dtype, loss scaling). Against fp32 "
    f"of the same framework: the Welch {LEVEL:.0%} confidence interval of the difference of means over "
    "seeds and an equivalence margin δ (report.delta per metric; default 1% of fp32's mean, as MLPerf's "
    "quality targets are about 99% of the reference). It matches within δ only when the whole interval "
    "lies inside ±δ; it is worse or better when the interval excludes 0; otherwise it is inconclusive, "
    "with an estimate of how many more seeds would settle it. A configuration needs two seeds or more for "
    "a verdict, and one with a NaN or inf loss or metric is never counted as a match."
)


def non_finite(job: JobRow) -> bool:
    """The run diverged: its loss or its held-out metric was NaN or inf."""
    return (
        job.loss_flag is not None
        or job.converge.get("eval_flag") is not None
        or not math.isfinite(job.metric("eval_final"))
    )


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else math.nan


@dataclass
class Cell:
    """One framework x precision (as it ran) of a task: its runs, one per seed."""

    framework: str
    precision: str
    runs: list[JobRow]
    label: str = ""  # what ran (JobRow.ran), the same for every run of the cell

    @property
    def sound(self) -> list[JobRow]:
        return [j for j in self.runs if not non_finite(j)]

    @property
    def flagged(self) -> list[JobRow]:
        return [j for j in self.runs if non_finite(j)]

    @property
    def finals(self) -> list[float]:
        return [j.metric("eval_final") for j in self.sound]

    @property
    def seeds(self) -> list[str]:
        return sorted((j.converge.get("seed", "?") for j in self.runs), key=lambda s: (len(s), s))

    @property
    def duplicates(self) -> list[str]:
        """Seeds run more than once in this cell with configurations that differ in something else."""
        return sorted((s for s, n in Counter(self.seeds).items() if n > 1), key=lambda s: (len(s), s))

    @property
    def mean(self) -> float:
        return _mean(self.finals)

    @property
    def std(self) -> float:
        return statistics.stdev(self.finals) if len(self.finals) >= 2 else math.nan

    @property
    def range(self) -> tuple[float, float]:
        return (min(self.finals), max(self.finals)) if self.finals else (math.nan, math.nan)

    def mean_of(self, key: str, runs: list[JobRow] | None = None) -> float:
        """Mean of a summary metric over the sound runs (or `runs`) that logged a finite value."""
        values = [j.metric(key) for j in (self.sound if runs is None else runs)]
        return _mean([v for v in values if math.isfinite(v)])

    @property
    def reached(self) -> list[JobRow]:
        """Sound runs that reached schedule.target."""
        return [j for j in self.sound if math.isfinite(j.metric("epochs_to_target"))]

    @property
    def precision_text(self) -> str:
        """The precision as a reader should read it: its name and what ran, e.g. "amp (mixed bfloat16)"."""
        return f"{self.precision} ({self.label})" if self.label else self.precision


@dataclass
class Verdict:
    """One sentence comparing a reduced precision with fp32. kind: worse | better | matches |
    inconclusive | diverged | duplicates | no-spread."""

    task: str
    framework: str
    precision: str
    kind: str
    text: str


@dataclass
class Task:
    """The converge runs of one model on one dataset, scored by one metric."""

    model: str
    dataset: str
    metric: str
    target: float
    cells: list[Cell]
    machine: str = ""  # named when the runs came from several machines: a task per machine

    @property
    def title(self) -> str:
        return f"{self.model} on {self.dataset}: {self.metric}" + (
            f" (machine={self.machine})" if self.machine else ""
        )

    @property
    def slug(self) -> str:
        raw = f"accuracy-{self.model}-{self.dataset}" + (f"-{self.machine}" if self.machine else "")
        return "".join(c if c.isalnum() else "-" for c in raw).strip("-").lower()

    @property
    def scale(self) -> float:
        """Factor that turns a metric difference into the points a reader expects: x 100 for a metric its
        workload registers as a fraction in [0, 1], else its own units (BLEU is already 0-100)."""
        return 100.0 if self.metric in fraction_metrics() else 1.0


@dataclass
class AccuracyAnalysis:
    tasks: list[Task]
    verdicts: list[Verdict]
    margins: Margins = field(default_factory=Margins)

    @property
    def runs(self) -> list[JobRow]:
        return [j for t in self.tasks for c in t.cells for j in c.runs]

    @property
    def has_flagged(self) -> bool:
        return any(c.flagged for t in self.tasks for c in t.cells)


def _rank(value: str, preferred: tuple[str, ...]) -> tuple[int, str]:
    return (preferred.index(value) if value in preferred else len(preferred), value)


def _latest_per_config(jobs: list[JobRow]) -> list[JobRow]:
    """The newest finished converge run of each configuration (its hash covers the seed and every
    setting): a rerun supersedes an older run of the same configuration, nothing else is replaced."""
    latest: dict[tuple, JobRow] = {}
    for j in sorted(jobs, key=lambda j: j.start_ms):
        if j.mode == CONVERGE and j.status == "FINISHED":
            # the configuration's hash does not cover the hardware: a run on another machine is no rerun
            key = (j.config_hash, j.machine) if j.config_hash else (j.run_id,)
            latest[key] = j
    return list(latest.values())


def _target(jobs: list[JobRow]) -> float:
    values = {j.converge.get("target") for j in jobs} - {None, "None", "null", ""}
    try:
        return float(values.pop()) if len(values) == 1 else math.nan
    except ValueError:
        return math.nan


def analyze_accuracy(jobs: list[JobRow], margins: Margins | None = None) -> AccuracyAnalysis:
    """Tasks, cells and verdicts for the finished `mode=converge` runs among `jobs` (others ignored);
    `margins` gives δ (default: 1% of fp32's mean)."""
    margins = margins or Margins()
    runs = _latest_per_config(jobs)
    several = len({j.machine for j in runs}) > 1  # seeds of two machines are never pooled in one cell
    by_task: dict[tuple[str, str, str, str], list[JobRow]] = {}
    for j in runs:
        machine = j.machine if several else ""
        key = (j.model, j.converge.get("dataset", "?"), j.converge.get("metric", "metric"), machine)
        by_task.setdefault(key, []).append(j)
    tasks, verdicts = [], []
    for (model, dataset, metric, machine), members in sorted(by_task.items()):
        cells: dict[tuple[str, str, str], list[JobRow]] = {}
        for j in members:
            cells.setdefault((j.framework, j.precision, j.ran), []).append(j)
        ordered = sorted(
            cells, key=lambda k: (_rank(k[0], FRAMEWORK_ORDER), _rank(k[1], PRECISION_ORDER), k[2])
        )
        task = Task(
            model,
            dataset,
            metric,
            _target(members),
            [Cell(fw, pr, cells[(fw, pr, r)], r) for fw, pr, r in ordered],
            machine,
        )
        tasks.append(task)
        verdicts += _verdicts(task, margins)
    return AccuracyAnalysis(tasks, verdicts, margins)


def _summary(cell: Cell, task: Task) -> str:
    """ "88.10 ± 0.10 (seeds 1, 2, 3)": the cell's final metric in the unit the verdict speaks of."""
    n = len(cell.finals)
    if not n:
        return "no finite result"
    spread = f" ± {cell.std * task.scale:.2f}" if n >= 2 else ""
    seeds = [j.converge.get("seed", "?") for j in cell.sound]
    return f"{cell.mean * task.scale:.2f}{spread} (seed{'s' if n != 1 else ''} {', '.join(sorted(seeds, key=lambda x: (len(x), x)))})"


def compare(task: Task, base: Cell, other: Cell, margins: Margins | None = None) -> Verdict:
    """The verdict on `other` (a reduced precision) against `base` (fp32) of the same framework."""
    what = other.precision_text
    where = f"{other.framework}, {task.model} on {task.dataset}"
    points = " points" if task.scale != 1 else ""
    numbers = f"{task.metric}{' in points' if points else ''}: fp32 {_summary(base, task)}, "
    numbers += f"{other.precision} {_summary(other, task)}"

    def verdict(kind: str, text: str) -> Verdict:
        return Verdict(task.title, other.framework, other.precision, kind, f"{where}: {text}")

    for cell, role in ((other, what), (base, "the fp32 baseline")):
        if cell.flagged:
            return verdict(
                "diverged",
                f"{role} diverged ({len(cell.flagged)} of {len(cell.runs)} seeds gave a NaN or inf loss or "
                "metric): not a match, no verdict.",
            )
        if cell.duplicates:
            return verdict(
                "duplicates",
                f"{role} holds seed(s) {', '.join(cell.duplicates)} more than once, from configurations "
                "that differ in more than the seed (all are listed in the table): no verdict; report one "
                "sweep at a time (--run) to compare like with like.",
            )
    if len(base.finals) < 2 or len(other.finals) < 2:
        return verdict(
            "no-spread",
            f"{what}: fewer than two seeds, so no confidence interval and no verdict ({numbers}).",
        )
    delta, source = (margins or Margins()).delta(task.metric, base.mean)
    iv = welch_interval(base.finals, other.finals)
    kind = classify(iv, delta)
    s = task.scale
    stated = (
        f"difference {iv.diff * s:+.2f}{points}, {LEVEL:.0%} interval [{iv.low * s:+.2f}, {iv.high * s:+.2f}], "
        f"δ ±{delta * s:.2f}{points} ({source}); {numbers}"
    )
    if kind == "matches":
        return verdict(
            "matches", f"{what} matches fp32 within δ: the whole interval lies inside ±δ ({stated})."
        )
    if kind in ("worse", "better"):
        return verdict(kind, f"{what} is {kind} than fp32: the interval excludes 0 ({stated}).")
    more = seeds_to_settle(base.finals, other.finals, delta)
    settle = (
        f"about {more:,} more seed{'s' if more != 1 else ''} per precision would settle it if the spread stays as observed"
        if more is not None
        else "more seeds would not settle it soon at this spread; a wider δ or a less noisy setup would"
    )
    return verdict(
        "inconclusive",
        f"{what} against fp32 is inconclusive: the interval neither lies inside ±δ nor excludes 0; "
        f"{settle} ({stated}).",
    )


def _verdicts(task: Task, margins: Margins) -> list[Verdict]:
    out = []
    for cell in task.cells:
        if cell.precision == BASELINE:
            continue
        base = next(
            (c for c in task.cells if c.framework == cell.framework and c.precision == BASELINE), None
        )
        if base is not None:
            out.append(compare(task, base, cell, margins))
    return out


def load_curves(
    clients: dict[str, MlflowClient], analysis: AccuracyAnalysis
) -> dict[str, list[tuple[int, float]]]:
    """run id -> [(epoch, value)] of its `eval/<metric>` series (runs without one are left out), each read
    from the store it came from (clients: tracking URI -> client)."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for task in analysis.tasks:
        for job in (j for c in task.cells for j in c.runs):
            points = clients[job.store].get_metric_history(job.run_id, f"eval/{task.metric}")
            if points:
                curves[job.run_id] = sorted((p.step, p.value) for p in points)
    return curves
