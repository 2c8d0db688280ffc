"""The three claims of the article dlbench rebuilds, re-tested on the runs a report covers.

Synced's 2019 evaluation ("TensorFlow vs PyTorch vs MXNet on a Titan RTX") concluded, among other things, that
TensorFlow and PyTorch lead on large inputs, that MXNet is the fastest on small images, and that mixed precision
is faster than FP32 without losing accuracy. Each claim gets a verdict from these runs only: one line per cell
that can test it (same model, mode, precision and execution class; compiled is never set against eager), the
rule of the findings (a difference counts when the runs' measured intervals do not overlap), and where the cells
ran: the article measured one GPU, so a verdict reached on a CPU says so. A claim no run here can test says why
(MXNet has no code for Hopper GPUs, so on an H100/H200 its claims are re-tested on a CPU).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from dlbench.report.accuracy import AccuracyAnalysis
from dlbench.report.analysis import BASELINE, RULE, Analysis, Group, noisy, ratio, separated
from dlbench.report.load import JobRow
from dlbench.report.render import Block, Table

LARGE_PX = 224  # ImageNet-size inputs (ResNet-50, VGG16; SSD300's 300) count as large
SMALL_PX = 64  # CIFAR-size inputs (the CIFAR ResNet's 32) count as small
MIXED = "amp"  # the article's "mixed precision": float16 (or bfloat16 on a CPU) autocast, float32 weights
HOLDS, FAILS, TIE = "holds", "does not hold", "no measurable difference"
INCONCLUSIVE = "inconclusive"  # an accuracy verdict that neither matches fp32 within δ nor is worse
UNTESTED = "not testable here"
NAMES = {"tf": "TensorFlow", "torch": "PyTorch", "mxnet": "MXNet", "jax": "JAX"}

LARGE = "On large inputs (ImageNet-size images) TensorFlow and PyTorch are faster than MXNet."
SMALL = "On small images (CIFAR-size) MXNet is the fastest framework."
MIXED_CLAIM = "Mixed precision is faster than FP32, without loss of accuracy."


@dataclass
class ClaimResult:
    """A claim, the verdict these runs give it, and the cells behind the verdict (one sentence each)."""

    claim: str
    verdict: str
    where: str  # the devices the tested cells ran on, or why nothing here tests the claim
    evidence: list[str] = field(default_factory=list)


def _sound(group: Group) -> list[JobRow]:
    """The group's runs that can carry a finding: not diverged, not on a shared or throttling GPU."""
    return [e.job for e in group.entries if e.job.loss_flag is None and not noisy(e.job)]


def _pixels(group: Group) -> int | None:
    size = group.entries[0].job.variant_params.get("model.image_size") if group.entries else None
    return int(size) if size and size.isdigit() else None


def _device(job: JobRow) -> str:
    if job.device == "cuda" or job.gpu_name:
        return job.gpu_name or "a GPU"
    facts = [job.host.get("cpu"), f"{job.host['cpu_count']} CPUs" if job.host.get("cpu_count") else None]
    facts = [f for f in facts if f]
    return f"a CPU ({', '.join(facts)})" if facts else "a CPU"


def _where(jobs: list[JobRow]) -> str:
    devices = sorted({_device(j) for j in jobs})
    on_cpu = any(not (j.device == "cuda" or j.gpu_name) for j in jobs)
    text = "on " + " and ".join(devices)
    return text + ("; the article measured a GPU (Titan RTX)" if on_cpu else "")


def _rate(job: JobRow, unit: str) -> str:
    return f"{NAMES.get(job.framework, job.framework)} {job.metric('throughput'):,.1f} {unit}/s"


def _cells(analysis: Analysis, pick: Callable[[Group], bool]) -> list[tuple[Group, str, list[JobRow]]]:
    """(group, precision, that precision's sound runs) for the groups `pick` accepts."""
    out = []
    for g in analysis.groups:
        if not pick(g):
            continue
        jobs = _sound(g)
        for precision in sorted({j.precision for j in jobs}):
            out.append((g, precision, [j for j in jobs if j.precision == precision]))
    return out


def _outcome(winner: JobRow, loser: JobRow) -> str:
    """HOLDS when `winner` (what the claim says is faster) is faster beyond both runs' spread, FAILS when
    `loser` is, else TIE."""
    return HOLDS if separated(winner, loser) else FAILS if separated(loser, winner) else TIE


def _verdict(outcomes: list[str]) -> str:
    """One outcome when every cell agrees, else how many cells gave each ("does not hold in 3, no measurable
    difference in 1 (of 4 cells)")."""
    counts = Counter(outcomes)
    if len(counts) == 1:
        return outcomes[0]
    parts = [f"{kind} in {counts[kind]}" for kind in (HOLDS, FAILS, TIE, INCONCLUSIVE) if counts[kind]]
    return f"{', '.join(parts)} (of {len(outcomes)} cells)"


def _no_mxnet(analysis: Analysis, size: str) -> str:
    if not any(j.framework == "mxnet" for j in analysis.finished):
        return (
            "MXNet ran in none of these runs (MXNet 1.9.1 has no code for Hopper GPUs such as the H100 and "
            "H200): re-test the claim on a CPU"
        )
    return f"no cell here has MXNet and another framework on {size} images at the same precision and mode"


def _against_mxnet(
    analysis: Analysis, claim: str, size: str, pick: Callable[[Group], bool], rivals: tuple[str, ...] | None
) -> ClaimResult:
    """Per cell that `pick` accepts: MXNet against the fastest of `rivals` (None: every other framework).
    With rivals named, the claim is that they beat MXNet; with None, that MXNet beats them all."""
    mxnet_wins = rivals is None
    outcomes, evidence, tested = [], [], []
    for g, precision, jobs in _cells(analysis, pick):
        mx = next((j for j in jobs if j.framework == "mxnet"), None)
        others = [j for j in jobs if j.framework != "mxnet" and (mxnet_wins or j.framework in rivals)]
        if mx is None or not others:
            continue
        best = max(others, key=lambda j: j.metric("throughput"))
        claimed, other = (mx, best) if mxnet_wins else (best, mx)
        outcome = _outcome(claimed, other)
        outcomes.append(outcome)
        tested += [claimed, other]
        r = ratio(claimed.metric("throughput"), other.metric("throughput"))
        against = "against the fastest other, " if mxnet_wins else "against "
        evidence.append(
            f"{g.title} {precision}: {_rate(claimed, g.unit)} {against}{_rate(other, g.unit)} ({r:.2f}×): {outcome}."
        )
    if not outcomes:
        return ClaimResult(claim, UNTESTED, _no_mxnet(analysis, size))
    return ClaimResult(claim, _verdict(outcomes), _where(tested), evidence)


def large_inputs(analysis: Analysis) -> ClaimResult:
    """The fastest of TensorFlow and PyTorch against MXNet, per cell of a model with inputs of 224 px or more."""
    return _against_mxnet(analysis, LARGE, "large", lambda g: (_pixels(g) or 0) >= LARGE_PX, ("tf", "torch"))


def small_images(analysis: Analysis) -> ClaimResult:
    """MXNet against the fastest other framework, per cell of a model with inputs of 64 px or fewer."""
    return _against_mxnet(analysis, SMALL, "small", lambda g: 0 < (_pixels(g) or 0) <= SMALL_PX, None)


def mixed_precision(analysis: Analysis, accuracy: AccuracyAnalysis) -> ClaimResult:
    """Speed: amp against fp32 of the same framework and execution mode, per cell. Accuracy: the report's
    amp-vs-fp32 verdicts (matching fp32 within δ, or better, holds; worse fails; the rest is inconclusive).
    The verdict gives both parts, unless both hold."""
    speed, evidence, tested = [], [], []
    for g in analysis.groups:
        jobs = _sound(g)
        for j in (j for j in jobs if j.precision == MIXED):
            base = next(
                (
                    b
                    for b in jobs
                    if (b.framework, b.execution, b.precision) == (j.framework, j.execution, BASELINE)
                ),
                None,
            )
            if base is None:
                continue
            outcome = _outcome(j, base)
            speed.append(outcome)
            tested += [j, base]
            r = ratio(j.metric("throughput"), base.metric("throughput"))
            evidence.append(
                f"{g.title}, {NAMES.get(j.framework, j.framework)} ({j.execution}): amp ({j.ran}) "
                f"{r:.2f}× fp32's throughput: {outcome}."
            )
    verdicts = [v for v in accuracy.verdicts if v.precision == MIXED]
    quality = [
        {"matches": HOLDS, "better": HOLDS, "worse": FAILS}.get(v.kind, INCONCLUSIVE) for v in verdicts
    ]
    evidence += [f"accuracy, {v.text}" for v in verdicts]
    if not speed and not quality:
        why = (
            "no framework ran both fp32 and amp in one mode and execution class here, and no accuracy verdict"
        )
        return ClaimResult(MIXED_CLAIM, UNTESTED, why)
    parts = (
        f"speed: {_verdict(speed) if speed else 'not tested in these runs'}",
        f"accuracy: {_verdict(quality) if quality else 'not tested in these runs (mode=converge gives its verdicts)'}",
    )
    verdict = HOLDS if set(speed + quality) == {HOLDS} and speed and quality else "; ".join(parts)
    return ClaimResult(MIXED_CLAIM, verdict, _where(tested + list(accuracy.runs)), evidence)


def retest(analysis: Analysis, accuracy: AccuracyAnalysis) -> list[ClaimResult]:
    """The three claims, in the article's order."""
    return [large_inputs(analysis), small_images(analysis), mixed_precision(analysis, accuracy)]


def claims_blocks(analysis: Analysis, accuracy: AccuracyAnalysis) -> list[Block]:
    """The section: one table row per claim (claim, verdict, where the cells ran), then, under it, one bullet
    per cell that was tested."""
    results = retest(analysis, accuracy)
    table = Block("The 2019 article's claims, re-tested")
    table.paragraphs.append(
        "Synced's 2019 evaluation of TensorFlow, PyTorch and MXNet on one Titan RTX drew these conclusions. "
        "Each is tested here on these runs alone, cell by cell (one model, mode, precision and execution "
        f"class). Rule: {RULE}"
    )
    rows = [[r.claim, r.verdict, r.where] for r in results]
    table.tables.append(Table("claims", "dlbench-table claims", ["claim", "verdict here", "tested"], rows))
    labels = ("Large inputs", "Small images", "Mixed precision")
    cells = Block("The cells behind each verdict", level=3, bullets_id="claim-cells")
    cells.bullets = [
        f"{label}: {line}" for label, r in zip(labels, results, strict=True) for line in r.evidence
    ]
    return [table, cells] if cells.bullets else [table]
