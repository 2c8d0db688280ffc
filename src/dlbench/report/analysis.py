"""From job rows to comparison tables and to sentences a reader can trust.

A table per (model, mode[, variant]) has one row per framework x precision. A sentence ("torch is 12%
faster than tf", "mixed precision speeds up torch by 2.1x") is written only when the two measurements'
intervals do not overlap. The interval of a run is the p5-p95 range of its timed windows, widened to
median x (1 +/- spread) when the job was repeated and logged `throughput_spread`; a run without
p5/p95 has no interval and is never the subject of a claim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from dlbench.core.execution import UNCOMPILED, execution_class
from dlbench.core.names import SPREAD_LIMIT
from dlbench.report.load import JobRow
from dlbench.telemetry.sampler import rough

FRAMEWORK_ORDER = ("tf", "torch", "mxnet", "jax")  # the order of the Synced 2019 article, then JAX
PRECISION_ORDER = ("fp32", "tf32", "amp", "bf16")
BASELINE = "fp32"
CONVERGE = "converge"  # the mode that trains to quality; its runs are reported by report/accuracy.py
SERVE = "serve"  # LoadGen's latency mode; its runs are reported by report/latency.py
RULE = (
    "A difference is stated only when the two runs' intervals do not overlap. A run's interval is the "
    "p5–p95 range of its timed windows' throughput, widened to median × (1 ± spread) when the job was "
    "repeated (spread = (max − min) / median of the repeats' medians, so the widened range holds every "
    "repeat's median); the percentage is the ratio of the medians."
)


def interval(job: JobRow) -> tuple[float, float]:
    """The range a run's throughput is known to within (NaN, NaN when p5/p95 were not logged)."""
    lo, hi, mid = job.metric("throughput_p05"), job.metric("throughput_p95"), job.metric("throughput")
    if math.isnan(lo) or math.isnan(hi) or math.isnan(mid):
        return math.nan, math.nan
    spread = job.metric("throughput_spread")
    if not math.isnan(spread):
        lo, hi = min(lo, mid * (1 - spread)), max(hi, mid * (1 + spread))
    return lo, hi


def ratio(a: float, b: float) -> float:
    """a / b, NaN when b is zero or missing (a job that logged 0 samples/s must not crash the report)."""
    return a / b if b > 0 and not math.isnan(a) else math.nan


def separated(a: JobRow, b: JobRow) -> bool:
    """True when a is faster than b beyond both runs' measured spread (intervals disjoint, a above)."""
    a_lo, _ = interval(a)
    _, b_hi = interval(b)
    return not (math.isnan(a_lo) or math.isnan(b_hi)) and a_lo > b_hi


def noisy(job: JobRow) -> bool:
    """Another process shared the GPU, or it throttled or its clock fell in the timed phase: the number
    may be low for reasons that are not the framework's."""
    return job.gpu_flag is not None or job.clock_flag is not None


def flagged(job: JobRow) -> bool:
    """Repeats disagreed by more than 5%: the row's number deserves suspicion."""
    spread = job.metric("throughput_spread")
    return job.spread_flag == "high" or (not math.isnan(spread) and spread > SPREAD_LIMIT)


def few_samples(job: JobRow) -> bool:
    """Its timed phase held too few telemetry samples: the means (utilization, energy) mostly describe
    what came before it. Runs logged before the count existed (NaN) are not marked."""
    return rough(job.metric("telemetry_samples"))


# A GPU busy less than this share of a timed phase waited on its host (kernel launches, Python dispatch): a
# framework difference measured there is mostly the host's. An H200 at ResNet-50 batch 64 showed both sides:
# PyTorch 35-60%, TF+XLA and JAX 74-96%.
HOST_BOUND_UTIL = 70.0


def host_bound(job: JobRow) -> bool:
    """The GPU was idle much of the timed phase, by enough telemetry to say so (a run whose samples were not
    counted, or too few, is never called host-bound: its mean may describe the warm-up)."""
    samples, util = job.metric("telemetry_samples"), job.metric("gpu_util_mean")
    return not (math.isnan(samples) or rough(samples)) and util < HOST_BOUND_UTIL


@dataclass
class Entry:
    """One table row: a finished job plus what it is compared against."""

    job: JobRow
    speedup: float = math.nan  # throughput / throughput of the same framework at fp32
    speedup_range: tuple[float, float] = (math.nan, math.nan)  # conservative: interval ratios
    rel_fastest: float = math.nan  # throughput / fastest framework's at this precision


@dataclass
class Group:
    """The runs of one model and mode (and variant, when e.g. batch sizes were swept too) in one execution
    class: compiled runs and eager/graph runs are never in one table, so never compared with each other."""

    model: str
    mode: str
    variant: str
    entries: list[Entry]
    execution: str = UNCOMPILED  # the class: compiled or eager/graph
    show_execution: bool = False  # the runs reported together mix classes: name it in the title

    @property
    def title(self) -> str:
        title = f"{self.model} {self.mode}" + (f" ({self.variant})" if self.variant else "")
        return title + (f", {self.execution}" if self.show_execution else "")

    @property
    def unit(self) -> str:
        """What the group's throughput counts (one model: one task, one unit)."""
        return self.entries[0].job.unit if self.entries else "samples"

    @property
    def slug(self) -> str:
        raw = f"{self.model}-{self.mode}" + (f"-{self.variant}" if self.variant else "")
        raw += f"-{self.execution}" if self.show_execution else ""
        return "".join(c if c.isalnum() else "-" for c in raw).strip("-").lower()

    def frame(self) -> pd.DataFrame:
        """The table's numbers (NaN = not measured), one row per framework x precision."""
        rows = []
        for e in self.entries:
            j = e.job
            rows.append(
                {
                    "framework": j.framework,
                    "execution": j.execution,
                    "precision": j.precision,
                    "throughput": j.metric("throughput"),
                    "p05": j.metric("throughput_p05"),
                    "p95": j.metric("throughput_p95"),
                    "spread": j.metric("throughput_spread"),
                    "flagged": flagged(j),
                    "diverged": j.loss_flag is not None,
                    "gpu_flag": j.gpu_flag or "",
                    "clock_flag": j.clock_flag or "",
                    "reused": j.reused,
                    "speedup_vs_fp32": e.speedup,
                    "rel_fastest": e.rel_fastest,
                    "gpu_util": j.metric("gpu_util_mean"),
                    "gpu_mem_mib": j.metric("gpu_mem_used_mib_max"),
                    "framework_mem_mib": j.metric("framework_mem_mib_max"),
                    "cpu_util": j.metric("cpu_util_mean"),
                    "energy_j_per_sample": j.metric("energy_j_per_sample"),
                    "telemetry_samples": j.metric("telemetry_samples"),
                    "host_bound": host_bound(j),
                    "timed_s": j.metric("timed_s"),
                    "warmup_s": j.metric("warmup_s"),
                    "threads": j.threads,
                    "run_id": j.run_id,
                }
            )
        return pd.DataFrame(rows)


@dataclass
class Finding:
    """One generated sentence. kind: mode (the runs mix execution modes) | framework | precision | tie."""

    kind: str
    group: str
    text: str


@dataclass
class Analysis:
    groups: list[Group]
    failed: list[JobRow]
    findings: list[Finding]
    hidden: int = 0  # older runs of a configuration that has a newer one
    notes: list[str] = field(default_factory=list)

    @property
    def finished(self) -> list[JobRow]:
        return [e.job for g in self.groups for e in g.entries]

    @property
    def has_gpu(self) -> bool:
        return any(not math.isnan(j.metric("gpu_util_mean")) for j in self.finished)

    @property
    def has_diverged(self) -> bool:
        return any(j.loss_flag is not None for j in self.finished)

    @property
    def has_noisy(self) -> bool:
        return any(noisy(j) for j in self.finished)

    @property
    def reused(self) -> int:
        return sum(j.reused for j in self.finished)

    @property
    def has_few_samples(self) -> bool:
        return any(few_samples(j) for j in self.finished)

    @property
    def has_spread(self) -> bool:
        return any(not math.isnan(j.metric("throughput_spread")) for j in self.finished)

    def frame(self) -> pd.DataFrame:
        """All tables in one frame (model, mode, variant columns added)."""
        parts = [g.frame().assign(model=g.model, mode=g.mode, variant=g.variant) for g in self.groups]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def in_order(values: list[str], preferred: tuple[str, ...]) -> list[str]:
    """The distinct values, those of `preferred` first in its order (the article's frameworks, fp32 first)."""
    return sorted(set(values), key=lambda v: (preferred.index(v) if v in preferred else len(preferred), v))


def _variants(jobs: list[JobRow]) -> dict[str, str]:
    """run_id -> variant label built from the VARIANT_PARAMS that differ inside a (model, mode) group."""
    out: dict[str, str] = {}
    by_group: dict[tuple[str, str], list[JobRow]] = {}
    for j in jobs:
        by_group.setdefault((j.model, j.mode), []).append(j)
    for members in by_group.values():
        keys = sorted({k for j in members for k in j.variant_params})
        labels: dict[str, list[str]] = {j.run_id: [] for j in members}
        for k in keys:
            having = [j for j in members if k in j.variant_params]
            values = [j.variant_params[k] for j in having]
            if len(set(values)) < 2:
                continue
            # A key only some runs have (a framework's own knob: framework.compile is torch's) labels
            # the runs that leave its usual value; the others run as the frameworks without it do.
            usual = None if len(having) == len(members) else max(sorted(set(values)), key=values.count)
            for j in having:
                if j.variant_params[k] != usual:
                    labels[j.run_id].append(f"{k}={j.variant_params[k]}")
        out.update({run_id: ", ".join(parts) for run_id, parts in labels.items()})
    return out


def analyze(jobs: list[JobRow]) -> Analysis:
    """Tables, failures and findings for a set of job runs (of one sweep or one experiment)."""
    variant = _variants(jobs)
    latest_ok: dict[tuple, JobRow] = {}
    for j in sorted(jobs, key=lambda j: j.start_ms):
        if j.mode in (CONVERGE, SERVE):
            continue  # their own sections: Accuracy (report/accuracy.py), latency (report/latency.py)
        if j.status == "FINISHED" and not math.isnan(j.metric("throughput")):
            latest_ok[_key(j, variant)] = j
    ok_ids = {j.run_id for j in latest_ok.values()}
    failed, hidden = [], 0
    for j in jobs:
        if j.run_id in ok_ids or (j.mode in (CONVERGE, SERVE) and j.status == "FINISHED"):
            continue
        newer = latest_ok.get(_key(j, variant))
        if newer is not None and newer.start_ms >= j.start_ms:
            hidden += 1  # superseded by a newer finished run of the same configuration
        else:
            failed.append(j)
    failed.sort(key=lambda j: j.start_ms)

    by_group: dict[tuple[str, str, str, str], list[JobRow]] = {}
    for (model, mode, var, *_), j in latest_ok.items():
        by_group.setdefault((model, mode, var, execution_class(j.execution)), []).append(j)
    mixed = len({cls for *_, cls in by_group}) > 1
    groups = [
        _group(model, mode, var, members, cls, mixed)
        for (model, mode, var, cls), members in sorted(by_group.items())
    ]
    findings = _mode_findings(list(latest_ok.values())) + [f for g in groups for f in _findings(g)]
    return Analysis(groups, failed, findings, hidden, notes=_thread_notes(list(latest_ok.values())))


def _key(j: JobRow, variant: dict[str, str]) -> tuple[str, ...]:
    """A configuration: runs with the same key are repeats of one another (the newest is shown)."""
    return (j.model, j.mode, variant[j.run_id], j.execution, j.framework, j.precision)


def _mode_findings(jobs: list[JobRow]) -> list[Finding]:
    """The one sentence that heads the findings when the runs mix compiled and eager/graph execution."""
    if len({execution_class(j.execution) for j in jobs}) < 2:
        return []
    modes = sorted({(j.framework, j.execution) for j in jobs})
    per_fw = "; ".join(
        f"{fw}: {', '.join(m for f, m in modes if f == fw)}"
        for fw in in_order([f for f, _ in modes], FRAMEWORK_ORDER)
    )
    text = (
        f"These runs mix execution modes ({per_fw}): frameworks are compared only within compiled runs "
        "(torch.compile, XLA) or within eager/graph runs, each in tables of their own, never across."
    )
    return [Finding("mode", "", text)]


def _thread_notes(jobs: list[JobRow]) -> list[str]:
    """Say so when runs of one model and mode used different CPU thread counts: their tables are kept
    apart (threads.* are variant params), so no sentence compares them."""
    notes = []
    for model, mode in sorted({(j.model, j.mode) for j in jobs}):
        counts = sorted({j.threads for j in jobs if (j.model, j.mode) == (model, mode) and j.threads})
        if len(counts) > 1:
            notes.append(
                f"{model} {mode}: runs used different CPU threads (intra/inter-op {', '.join(counts)}); "
                "they are in separate tables and not compared with each other (set threads=N to compare)."
            )
    return notes


def _group(model: str, mode: str, variant: str, jobs: list[JobRow], cls: str, mixed: bool) -> Group:
    fw_order = in_order([j.framework for j in jobs], FRAMEWORK_ORDER)
    pr_order = in_order([j.precision for j in jobs], PRECISION_ORDER)
    jobs = sorted(jobs, key=lambda j: (fw_order.index(j.framework), j.execution, pr_order.index(j.precision)))
    entries = [Entry(j) for j in jobs]
    for e in entries:
        base = _baseline(e.job, jobs)
        if base is not None:
            e.speedup = ratio(e.job.metric("throughput"), base.metric("throughput"))
            lo, hi = interval(e.job)
            b_lo, b_hi = interval(base)
            if not any(math.isnan(x) for x in (lo, hi, b_lo, b_hi)) and b_lo > 0:
                e.speedup_range = (lo / b_hi, hi / b_lo)
        fastest = max(j.metric("throughput") for j in jobs if j.precision == e.job.precision)
        e.rel_fastest = ratio(e.job.metric("throughput"), fastest)
    return Group(model, mode, variant, entries, cls, mixed)


def _baseline(job: JobRow, jobs: list[JobRow]) -> JobRow | None:
    """The same framework, in the same execution mode, at fp32."""
    return next(
        (
            j
            for j in jobs
            if (j.framework, j.execution, j.precision) == (job.framework, job.execution, BASELINE)
        ),
        None,
    )


def _name(job: JobRow, jobs: list[JobRow]) -> str:
    """The framework, with its execution mode where the table holds it in more than one mode."""
    several = len({j.execution for j in jobs if j.framework == job.framework}) > 1
    return f"{job.framework} ({job.execution})" if several else job.framework


def precision_label(name: str) -> str:
    return {"amp": "mixed precision (amp)", "bf16": "bf16 mixed precision", "tf32": "TF32 math"}.get(
        name, name
    )


def faster_text(r: float) -> str:
    """1.12 -> '12% faster'; 1.004 -> '0.4% faster' (a difference the spread allows, never '0% faster');
    2.3 -> '2.3× faster' (percentages stop reading well past 100%)."""
    if r >= 2:
        return f"{r:.1f}× faster"
    pct = (r - 1) * 100
    return f"{pct:.1f}% faster" if pct < 0.95 else f"{pct:.0f}% faster"


def _findings(g: Group) -> list[Finding]:
    out: list[Finding] = []
    # a diverged training, or a run on a shared or throttling GPU, proves nothing
    sound = [e for e in g.entries if e.job.loss_flag is None and not noisy(e.job)]
    jobs = [e.job for e in sound]
    # Frameworks against each other, per precision: the fastest against each other framework.
    for precision in in_order([j.precision for j in jobs], PRECISION_ORDER):
        same = sorted((j for j in jobs if j.precision == precision), key=lambda j: -j.metric("throughput"))
        if len(same) < 2:
            continue
        details = [g.variant] * bool(g.variant) + [f"{g.execution} runs"] * g.show_execution
        best, where = (
            same[0],
            f"on {g.model} {g.mode} {precision}" + (f" ({', '.join(details)})" if details else ""),
        )
        beaten, ties = [], []
        for other in same[1:]:
            r = ratio(best.metric("throughput"), other.metric("throughput"))
            (beaten if separated(best, other) else ties).append((other, r))
        if beaten:
            parts = [f"{faster_text(r)} than {_name(o, jobs)}" for o, r in beaten]
            text = f"{where}, {_name(best, jobs)} is {_join(parts)}."
            compared = [best, *(o for o, _ in beaten)]
            out.append(Finding("framework", g.title, text + host_note(compared, jobs) + caveat(compared)))
        if ties:
            names = _join([_name(best, jobs)] + [_name(o, jobs) for o, _ in ties])
            text = f"{where}, {names} are within the measured spread (no clear winner)."
            out.append(Finding("tie", g.title, text + caveat([best, *(o for o, _ in ties)])))
    # Each reduced precision against fp32, per framework.
    for e in sound:
        j = e.job
        base = _baseline(j, jobs)
        if j.precision == BASELINE or math.isnan(e.speedup) or base is None:
            continue
        what = f"{j.precision} ({j.ran})" if j.pure else precision_label(j.precision)
        where, note = f"{_name(j, jobs)} on {g.title}", caveat([j, base])
        if separated(j, base):
            out.append(Finding("precision", g.title, f"{what} speeds up {where} by {e.speedup:.2f}×.{note}"))
        elif separated(base, j):
            text = f"{what} slows down {where}: {e.speedup:.2f}× the fp32 throughput.{note}"
            out.append(Finding("precision", g.title, text))
        else:
            out.append(Finding("tie", g.title, f"{what} makes no measurable difference for {where}.{note}"))
    return out


def host_note(compared: list[JobRow], jobs: list[JobRow]) -> str:
    """A sentence for a framework difference that rests on host-bound runs: whose GPU sat idle, how much."""
    bound = [j for j in compared if host_bound(j)]
    if not bound:
        return ""
    busy = _join([f"{_name(j, jobs)} kept the GPU busy {j.metric('gpu_util_mean'):.0f}%" for j in bound])
    return (
        f" Host-bound: {busy} of the timed phase, so this difference measures how fast the host issues "
        "the work more than the GPU's speed (a larger batch measures the GPU)."
    )


def caveat(compared: list[JobRow]) -> str:
    """A sentence for a finding whose runs were measured in different sweeps (one framework a sweep, or a run
    reused by resume=true from an earlier one: another time, maybe another load): it says how far apart they
    started and names the reused runs."""
    if len({j.sitting for j in compared}) < 2:
        return ""
    reused = [f"{j.framework} {j.precision} (run {j.run_id[:8]})" for j in compared if j.reused]
    which = f"; reused from an earlier sweep (resume=true): {_join(reused)}" if reused else ""
    starts = [j.start_ms for j in compared]
    span = f" (first to last start: {span_text(max(starts) - min(starts))})"
    return f" Caveat: these runs were measured in different sweeps{span}{which}, so load may differ."


def span_text(ms: int) -> str:
    """How far apart the sweeps started, so a reader can weigh the caveat: sweeps run back to back on one
    machine minutes apart differ less than runs reused from last week."""
    minutes = ms / 60_000
    if minutes < 1:
        return "under 1 min"
    if minutes < 120:
        return f"{minutes:.0f} min"
    return f"{minutes / 60:.0f} h" if minutes < 48 * 60 else f"{minutes / 1440:.0f} days"


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
