"""The multirun's parent run and the sweep's tally.

Hydra runs the jobs of a sweep in this process (basic launcher), one after another. A Hydra callback
notes the sweep's start; the parent run is made together with the sweep's first job run
(`ensure_parent`), so a sweep whose every job is refused by validation leaves no empty parent behind;
its id is also put in the environment so launchers that run jobs in other processes find it. The
entry point owns a `SweepTally` (passed to every job explicitly), exits non-zero when a job failed,
lets `fail_fast` skip the rest, and ends the sweep with `finish_sweep` (counts, report, status).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from dlbench import signals
from dlbench.core.names import (
    JOBS_FAILED_TAG,
    JOBS_FINISHED_TAG,
    JOBS_NOT_RUN_TAG,
    KIND_SWEEP,
    KIND_TAG,
    MLFLOW_RUN_ID_TAG,
    NOT_RUN,
    NOT_RUN_PREFIX,
    OVERRIDES_TAG,
    SWEEP_DIR_TAG,
    SWEEP_RUN_ID_TAG,
)
from dlbench.core.secrets import mask
from dlbench.environment import git_commit, host_tags
from dlbench.tracking.run_logger import RunLogger
from dlbench.tracking.store import open_store, resolve_uri
from dlbench.tracking.ui_records import log_results_table, share_sweep_view, sweep_view_key, ui_url

log = logging.getLogger("dlbench")
PARENT_ENV = "DLBENCH_PARENT_RUN_ID"
DEFAULT_EXPERIMENT_ID = "0"  # MLflow's "Default": where `mlflow run` puts its run unless told otherwise


@dataclass
class PendingSweep:
    """What the parent run will record, known at the sweep's start."""

    uri: str
    experiment: str
    overrides: str
    sweep_dir: str
    report: bool = True  # report.enabled: log the comparison report on the parent at the end
    equivalence: float = 0.01  # report.equivalence and report.delta: the accuracy verdicts' margin δ
    delta: dict[str, float] = field(default_factory=dict)


@dataclass
class SweepTally:
    """Which jobs of this invocation finished, failed, or could not run on this machine (NOT_RUN: skipped
    with its reason, not a failure); made by the entry point, passed to each job."""

    failed: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)  # "label: reason"
    abort: bool = False  # fail_fast tripped (or the store is unusable): the remaining jobs are skipped

    def add(self, label: str, status: str, fail_fast: bool) -> None:
        if status == "FINISHED":
            self.finished.append(label)
        elif status == NOT_RUN:
            self.not_run.append(label)
        else:
            self.failed.append(label)
            self.abort = self.abort or fail_fast


@dataclass
class SweepState:
    """The parent run shared by the Hydra callback (which cannot be handed arguments) and the jobs."""

    pending: PendingSweep | None = None  # a sweep has started; its parent run is made on first use
    parent: RunLogger | None = None
    experiment_id: str | None = None
    adopted: bool = False  # the parent is the run `mlflow run` made: not ours to terminate
    outer: RunLogger | None = None  # `mlflow run`'s run in "Default", not adopted (adopt_mlflow_run)
    closed: bool = False  # the parent run has been terminated
    job_runs: int = 0  # job runs made by this invocation (an interrupt says what it closed)
    modes: set[str] = field(default_factory=set)  # the job modes recorded so far: the view's columns


STATE = SweepState()


def adopt_mlflow_run(client: Any, experiment_id: str) -> tuple[RunLogger, str] | None:
    """`mlflow run` sets MLFLOW_RUN_ID; that run becomes the parent (the variable is removed so no job's
    logging lands in it by accident) when it is in a named experiment. One in MLflow's "Default" (no
    --experiment-name given) is not adopted: the sweep goes to `experiment_id` (tracking.experiment)
    under its own parent, and the two runs are tagged with each other's id. Returns (parent, its
    experiment id) or None."""
    run_id = os.environ.pop("MLFLOW_RUN_ID", None)
    if not run_id:
        return None
    try:
        outer = client.get_run(run_id)
    except Exception:
        log.warning(
            "MLFLOW_RUN_ID=%s is not in %s (set MLFLOW_TRACKING_URI for `mlflow run`); not nesting under it",
            run_id,
            mask(client.tracking_uri),
        )
        return None
    if outer.info.experiment_id == DEFAULT_EXPERIMENT_ID and experiment_id != DEFAULT_EXPERIMENT_ID:
        STATE.outer = RunLogger(client, run_id)
        return None
    return RunLogger(client, run_id), outer.info.experiment_id


class SweepTracking(Callback):
    """Hydra callback: one MLflow parent run per multirun."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        STATE.__init__()  # a fresh parent per sweep (tests run several in one process)
        STATE.pending = PendingSweep(
            uri=resolve_uri(config.tracking.uri),
            experiment=config.tracking.experiment,
            overrides=" ".join(config.hydra.overrides.task),
            sweep_dir=config.hydra.sweep.dir,
            report=bool(OmegaConf.select(config, "report.enabled", default=True)),
            equivalence=float(OmegaConf.select(config, "report.equivalence", default=0.01)),
            delta={
                k: float(v)
                for k, v in (OmegaConf.select(config, "report.delta", default={}) or {}).items()
                if v is not None
            },
        )


def ensure_parent() -> RunLogger | None:
    """The sweep's parent run, made now if this is the sweep's first job run; None outside a sweep."""
    sweep = STATE.pending
    if STATE.parent is not None or sweep is None:
        return STATE.parent
    client, experiment_id = open_store(sweep.uri, sweep.experiment)
    signals.check()  # a safe point: the store is whole and no run is made yet, so nothing is left to close
    adopted = adopt_mlflow_run(client, experiment_id)
    tags = {
        KIND_TAG: KIND_SWEEP,
        SWEEP_DIR_TAG: sweep.sweep_dir,
        OVERRIDES_TAG: sweep.overrides,
    }
    tags.update(host_tags())
    if adopted:
        parent, experiment_id = adopted
        STATE.adopted = True
    else:
        name = f"sweep {dt.datetime.now():%Y-%m-%d %H:%M:%S}"
        with signals.held():  # made and recorded together, so an interrupt always finds it to close
            parent = RunLogger.create(client, experiment_id, name)
            STATE.parent = parent
    STATE.parent, STATE.experiment_id = parent, experiment_id
    parent.tags(tags)
    parent.params({"sweep.overrides": sweep.overrides or "(none)", "git_commit": git_commit()})
    share_sweep_view(client, experiment_id, parent.run_id)  # what the link printed at the end opens
    outer = STATE.outer
    if outer is not None:  # `mlflow run`'s own run, left in "Default": point both ways
        outer.tags({SWEEP_RUN_ID_TAG: parent.run_id})
        parent.tags({MLFLOW_RUN_ID_TAG: outer.run_id})
    os.environ[PARENT_ENV] = parent.run_id
    log.info("MLflow parent run %s (experiment %s)", parent.run_id, experiment_id)
    return parent


def note_job_mode(mode: str) -> None:
    """A job of this sweep is recorded in `mode`: the first of a mode re-shares the sweep's view with that
    mode's columns (a serving job logs LoadGen's figures, not throughput). Outside a sweep, nothing."""
    if STATE.parent is None or STATE.experiment_id is None or mode in STATE.modes:
        return
    STATE.modes.add(mode)
    share_sweep_view(STATE.parent.client, STATE.experiment_id, STATE.parent.run_id, STATE.modes)


def record_not_run(key: str, cell: str, reason: str) -> None:
    """Note on the sweep's parent (made now if need be) a cell this machine cannot run, so the report lists
    it; `key` (the job's config hash) keeps one tag per cell however often it is asked for."""
    parent = ensure_parent()
    if parent is not None:
        parent.tags({f"{NOT_RUN_PREFIX}{key}": f"{cell}: {reason}"})


def finish_sweep(tally: SweepTally) -> None:
    """The sweep's end (all jobs ran): counts on the parent, the report, then FINISHED or FAILED."""
    parent, sweep = STATE.parent, STATE.pending
    if parent is None or sweep is None:
        return
    parent.tags(
        {
            JOBS_FINISHED_TAG: len(tally.finished),
            JOBS_FAILED_TAG: len(tally.failed),
            JOBS_NOT_RUN_TAG: len(tally.not_run),
        }
    )
    status = "FAILED" if tally.failed else "FINISHED"
    signals.check()  # safe points around the report: an interrupt now ends the sweep KILLED
    if sweep.report and not (tally.finished or tally.failed):  # every cell was one this machine cannot run
        log.warning("report: not made: no job of this sweep ran here (the reasons are above)")
    elif sweep.report:
        log_report(parent, sweep.uri, Path(sweep.sweep_dir) / "report", sweep, status)
    signals.check()
    close_parent(status)
    os.environ.pop(PARENT_ENV, None)


def log_report(
    parent: RunLogger, uri: str, out_dir: Path, sweep: PendingSweep | None = None, status: str | None = None
) -> None:
    """Write the sweep's comparison report into out_dir and log it on the parent run under `report/`;
    `status`: what the parent is closed with right after. A report problem is a warning, never a failed
    sweep: the measurements are already safe."""
    try:
        from dlbench.report import build_report  # pandas and matplotlib only when a report is made
        from dlbench.report.equivalence import Margins

        margins = Margins(sweep.equivalence, sweep.delta) if sweep else None
        report = build_report(
            parent.client,
            uri,
            out_dir,
            run_id=parent.run_id,
            require_finished=False,
            margins=margins,
            parent_status=status,
        )
        for path in report.files:
            parent.artifact(path, "report")
        log_results_table(parent.client, parent.run_id, report.analysis.frame())
        log.info("report: %s (artifacts report/ of run %s)", report.html, parent.run_id)
        view = sweep_view_key(parent.run_id)  # the view share_sweep_view stored with the parent
        log.info("MLflow UI: %s", ui_url(uri, report.selection.experiment_id, view_key=view))
    except Exception as exc:
        log.warning("report: not made (%s: %s); the sweep's runs are unaffected", type(exc).__name__, exc)


def close_parent(status: str) -> None:
    """Terminate our parent run once: at the sweep's end, on Ctrl-C (KILLED), or when Hydra stopped
    the sweep with an error (e.g. a bad value in the second job's overrides)."""
    if STATE.parent is None or STATE.adopted or STATE.closed:
        return
    STATE.closed = True
    try:
        with signals.held():  # not cut short by the alarm: the parent must not stay RUNNING
            STATE.parent.finish(status)
    except Exception as exc:  # the store may be what failed; never mask the original problem
        log.warning("could not mark the parent run %s: %s", status, exc)
