"""The Accuracy section's numbers: `mode=converge` runs grouped by task, framework and precision, over seeds.

A task (model x dataset x metric) gets one table and one chart. A cell (framework x precision) holds the
runs of its seeds: the mean and sample standard deviation of the final held-out metric, the best value,
epochs and wall time to `schedule.target`, and train throughput.

Verdicts follow the speed findings' rule (report/analysis.py): a difference is stated only when the two
measurements' ranges do not overlap. Here a cell's range is the lowest to the highest final value over
its seeds, so "amp loses X points" means every amp seed finished below every fp32 seed; overlapping
ranges read "matches fp32 within the seed spread". A cell with fewer than two seeds has no spread and
gets no verdict. A run whose loss or metric was NaN or inf is flagged: it is shown, counted apart, and a
cell holding one is never reported as a match.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from mlflow.tracking import MlflowClient

from dlbench.report.analysis import BASELINE, CONVERGE, FRAMEWORK_ORDER, PRECISION_ORDER, precision_label
from dlbench.report.load import JobRow
from dlbench.workloads.registry import fraction_metrics

VERDICT_RULE = (
    "Final metric: mean ± sample standard deviation over seeds (one run per seed; each seed fixes data "
    "order and augmentation, identical across frameworks, and the initial weights: the same numbers in "
    "every framework where the model draws them from the seed, else the framework's own RNG seeded, as "
    "each run's tag run.init says). A reduced precision is said "
    "to gain or lose against fp32 only when the two seed ranges (lowest to highest final value) do not "
    "overlap; overlapping ranges read as a match within the seed spread. A configuration needs two seeds "
    "or more for a verdict, and one with a NaN or inf loss or metric is never counted as a match."
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
    """One framework x precision of a task: its runs, one per seed."""

    framework: str
    precision: str
    runs: list[JobRow]

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
    def on_cpu(self) -> bool:
        return any((j.device or "").startswith("cpu") for j in self.runs)

    @property
    def precision_text(self) -> str:
        """The precision as a reader should read it: on a CPU, amp computes in bfloat16."""
        return "amp = bf16 on CPU" if self.precision == "amp" and self.on_cpu else self.precision


@dataclass
class Verdict:
    """One sentence comparing a reduced precision with fp32. kind: loses | gains | matches | diverged |
    no-spread."""

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

    @property
    def title(self) -> str:
        return f"{self.model} on {self.dataset}: {self.metric}"

    @property
    def slug(self) -> str:
        raw = f"accuracy-{self.model}-{self.dataset}"
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

    @property
    def runs(self) -> list[JobRow]:
        return [j for t in self.tasks for c in t.cells for j in c.runs]

    @property
    def has_flagged(self) -> bool:
        return any(c.flagged for t in self.tasks for c in t.cells)


def _rank(value: str, preferred: tuple[str, ...]) -> tuple[int, str]:
    return (preferred.index(value) if value in preferred else len(preferred), value)


def _latest_per_seed(jobs: list[JobRow]) -> list[JobRow]:
    """The newest finished converge run of each configuration and seed (an older rerun is superseded)."""
    latest: dict[tuple, JobRow] = {}
    for j in sorted(jobs, key=lambda j: j.start_ms):
        if j.mode == CONVERGE and j.status == "FINISHED":
            key = (j.model, j.converge.get("dataset"), j.framework, j.precision, j.converge.get("seed"))
            latest[key] = j
    return list(latest.values())


def _target(jobs: list[JobRow]) -> float:
    values = {j.converge.get("target") for j in jobs} - {None, "None", "null", ""}
    try:
        return float(values.pop()) if len(values) == 1 else math.nan
    except ValueError:
        return math.nan


def analyze_accuracy(jobs: list[JobRow]) -> AccuracyAnalysis:
    """Tasks, cells and verdicts for the finished `mode=converge` runs among `jobs` (others ignored)."""
    by_task: dict[tuple[str, str, str], list[JobRow]] = {}
    for j in _latest_per_seed(jobs):
        key = (j.model, j.converge.get("dataset", "?"), j.converge.get("metric", "metric"))
        by_task.setdefault(key, []).append(j)
    tasks, verdicts = [], []
    for (model, dataset, metric), members in sorted(by_task.items()):
        cells: dict[tuple[str, str], list[JobRow]] = {}
        for j in members:
            cells.setdefault((j.framework, j.precision), []).append(j)
        ordered = sorted(cells, key=lambda k: (_rank(k[0], FRAMEWORK_ORDER), _rank(k[1], PRECISION_ORDER)))
        task = Task(
            model, dataset, metric, _target(members), [Cell(fw, pr, cells[(fw, pr)]) for fw, pr in ordered]
        )
        tasks.append(task)
        verdicts += _verdicts(task)
    return AccuracyAnalysis(tasks, verdicts)


def _summary(cell: Cell, task: Task) -> str:
    """ "88.10 ± 0.10 (3 seeds)": the cell's final metric in the unit the verdict speaks of."""
    n = len(cell.finals)
    spread = f" ± {cell.std * task.scale:.2f}" if n >= 2 else ""
    return (
        f"{cell.mean * task.scale:.2f}{spread} ({n} seed{'s' if n != 1 else ''})" if n else "no finite result"
    )


def compare(task: Task, base: Cell, other: Cell) -> Verdict:
    """The verdict on `other` (a reduced precision) against `base` (fp32) of the same framework."""
    on_cpu = other.precision == "amp" and other.on_cpu
    what = "mixed precision (amp = bf16 on CPU)" if on_cpu else precision_label(other.precision)
    where = f"{other.framework}, {task.model} on {task.dataset}"
    unit = "points of " if task.scale != 1 else ""
    numbers = f"{task.metric}{' in points' if task.scale != 1 else ''}: fp32 {_summary(base, task)}, "
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
    if len(base.finals) < 2 or len(other.finals) < 2:
        return verdict(
            "no-spread", f"{what}: fewer than two seeds, so no seed spread and no verdict ({numbers})."
        )
    (b_lo, b_hi), (o_lo, o_hi) = base.range, other.range
    diff = (other.mean - base.mean) * task.scale
    if o_hi < b_lo:
        return verdict("loses", f"{what} loses {-diff:.2f} {unit}{task.metric} against fp32 ({numbers}).")
    if o_lo > b_hi:
        return verdict("gains", f"{what} gains {diff:.2f} {unit}{task.metric} over fp32 ({numbers}).")
    return verdict("matches", f"{what} matches fp32 within the seed spread ({numbers}).")


def _verdicts(task: Task) -> list[Verdict]:
    out = []
    for cell in task.cells:
        if cell.precision == BASELINE:
            continue
        base = next(
            (c for c in task.cells if c.framework == cell.framework and c.precision == BASELINE), None
        )
        if base is not None:
            out.append(compare(task, base, cell))
    return out


def load_curves(client: MlflowClient, analysis: AccuracyAnalysis) -> dict[str, list[tuple[int, float]]]:
    """run id -> [(epoch, value)] of its `eval/<metric>` series (runs without one are left out)."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for task in analysis.tasks:
        for job in (j for c in task.cells for j in c.runs):
            points = client.get_metric_history(job.run_id, f"eval/{task.metric}")
            if points:
                curves[job.run_id] = sorted((p.step, p.value) for p in points)
    return curves
