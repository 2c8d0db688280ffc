"""Scaling over devices: how much of N times one device's throughput a data-parallel job reaches.

Scaling efficiency = N-device throughput / (N x 1-device throughput), for runs of one sweep that differ
only in `devices` (and in the threads each rank got: torch's ranks split the job's CPU threads, XLA's
CPU pool has a thread per host device, and tf's replicas share one process's threads, so the threads.*
params differ by design). Both throughputs are the job's: summed over its ranks (torch) or the global
batch's (JAX's mesh, TF's replicas), at the same per-device batch. The section appears only when the runs
hold a job on more than one device.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlbench.report.analysis import Analysis
from dlbench.report.load import JobRow
from dlbench.report.render import Block, Table, fmt_throughput

# Params that may differ between the runs a scaling line compares: the ranks and what each got.
NOT_COMPARED = ("devices", "threads.intra_op", "threads.inter_op")


@dataclass(frozen=True)
class Scaling:
    """One N-device run beside the 1-device run of the same setting."""

    one: JobRow
    many: JobRow

    @property
    def efficiency(self) -> float:
        return self.many.metric("throughput") / (self.many.devices * self.one.metric("throughput"))

    @property
    def line(self) -> str:
        j, unit = self.many, self.many.unit
        return (
            f"{j.framework} {j.model} {j.precision} {j.mode}: {j.devices} devices "
            f"{fmt_throughput(j.metric('throughput'))} {unit}/s, 1 device "
            f"{fmt_throughput(self.one.metric('throughput'))} {unit}/s: scaling efficiency "
            f"{100 * self.efficiency:.0f}%"
        )


def _setting(j: JobRow) -> tuple:
    """What must be equal for two runs to be compared: the sweep, the cell and every other variant key."""
    rest = tuple(sorted((k, v) for k, v in j.variant_params.items() if k not in NOT_COMPARED))
    return (j.sitting, j.model, j.mode, j.framework, j.precision, j.execution, rest)


def scalings(jobs: list[JobRow]) -> list[Scaling]:
    """Each finished run on several devices with its 1-device counterpart of the same sweep, if any."""
    ones = {_setting(j): j for j in jobs if j.devices == 1 and j.metric("throughput") > 0}
    out = [Scaling(one, j) for j in jobs if j.devices > 1 and (one := ones.get(_setting(j))) is not None]
    return sorted(out, key=lambda s: (s.many.model, s.many.framework, s.many.precision, s.many.devices))


def scaling_block(analysis: Analysis) -> Block | None:
    """The "Scaling over devices" section, or None when no run used more than one device."""
    jobs = analysis.finished
    if not any(j.devices > 1 for j in jobs):
        return None
    b = Block("Scaling over devices")
    b.paragraphs.append(
        "Scaling efficiency = N-device throughput / (N × 1-device throughput), runs of the same sweep "
        "that differ only in `devices`; throughput is the job's (summed over torch's ranks, the global "
        "batch on JAX's mesh and TF's replicas), at the same per-device batch (schedule.batch_size), with "
        "the job's CPU threads split between torch's ranks (JAX and TF: one process)."
    )
    found = scalings(jobs)
    if not found:
        b.paragraphs.append("No 1-device run of the same setting to compare with.")
        return b
    b.bullets.extend(s.line for s in found)
    rows = [
        [
            s.many.framework,
            s.many.model,
            s.many.precision,
            str(s.many.devices),
            fmt_throughput(s.one.metric("throughput")),
            fmt_throughput(s.many.metric("throughput")),
            s.many.unit,
            f"{100 * s.efficiency:.0f}%",
        ]
        for s in found
    ]
    headers = ["framework", "model", "precision", "devices", "1 device", "N devices", "unit", "efficiency"]
    b.tables.append(Table("scaling", "dlbench-table scaling", headers, rows))
    return b
