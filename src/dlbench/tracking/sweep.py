"""The multirun's parent run, made by a Hydra callback, and the sweep's running tally.

Hydra runs the jobs of a sweep in this process (basic launcher), one after another; the tally lets
`src/run.py` exit non-zero when a job failed and lets `fail_fast` skip the rest. The parent run id is
also put in the environment so launchers that run jobs in other processes find it.
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

from dlbench.environment import git_commit, host_facts
from dlbench.tracking.run_logger import RunLogger
from dlbench.tracking.store import open_store, resolve_uri

log = logging.getLogger("dlbench")
PARENT_ENV = "DLBENCH_PARENT_RUN_ID"


@dataclass
class SweepState:
    parent: RunLogger | None = None
    experiment_id: str | None = None
    adopted: bool = False  # the parent is the run `mlflow run` made: not ours to terminate
    failed: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    abort: bool = False  # fail_fast tripped: the remaining jobs are skipped
    closed: bool = False  # the parent run has been terminated


STATE = SweepState()


def adopt_mlflow_run(client: Any) -> tuple[RunLogger, str] | None:
    """`mlflow run` sets MLFLOW_RUN_ID; that run becomes the parent and the variable is removed so
    no job's logging lands in it by accident. Returns (parent, its experiment id) or None."""
    run_id = os.environ.pop("MLFLOW_RUN_ID", None)
    if not run_id:
        return None
    try:
        experiment_id = client.get_run(run_id).info.experiment_id
    except Exception:
        log.warning(
            "MLFLOW_RUN_ID=%s is not in %s (set MLFLOW_TRACKING_URI for `mlflow run`); not nesting under it",
            run_id,
            client.tracking_uri,
        )
        return None
    return RunLogger(client, run_id), experiment_id


class SweepTracking(Callback):
    """Hydra callback: one MLflow parent run per multirun."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        STATE.__init__()  # a fresh tally per sweep (tests run several in one process)
        client, experiment_id = open_store(resolve_uri(config.tracking.uri), config.tracking.experiment)
        adopted = adopt_mlflow_run(client)
        overrides = " ".join(config.hydra.overrides.task)
        tags = {
            "dlbench.kind": "sweep",
            "dlbench.sweep_dir": config.hydra.sweep.dir,
            "dlbench.overrides": overrides,
        }
        tags.update({f"host.{k}": v for k, v in host_facts().items()})
        if adopted:
            parent, experiment_id = adopted
            parent.tags(tags)
            STATE.adopted = True
        else:
            name = f"sweep {dt.datetime.now():%Y-%m-%d %H:%M:%S}"
            parent = RunLogger.create(client, experiment_id, name, tags=tags)
        parent.params({"sweep.overrides": overrides or "(none)", "git_commit": git_commit()})
        STATE.parent, STATE.experiment_id = parent, experiment_id
        os.environ[PARENT_ENV] = parent.run_id
        log.info("MLflow parent run %s (experiment %s)", parent.run_id, experiment_id)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        parent = STATE.parent
        if parent is None:
            return
        parent.tags({"dlbench.jobs_finished": len(STATE.finished), "dlbench.jobs_failed": len(STATE.failed)})
        if OmegaConf.select(config, "report.enabled", default=True):
            log_report(parent, resolve_uri(config.tracking.uri), Path(config.hydra.sweep.dir) / "report")
        close_parent("FAILED" if STATE.failed else "FINISHED")
        os.environ.pop(PARENT_ENV, None)


def log_report(parent: RunLogger, uri: str, out_dir: Path) -> None:
    """Write the sweep's comparison report into out_dir and log it on the parent run under `report/`.
    A report problem is a warning, never a failed sweep: the measurements are already safe."""
    try:
        from dlbench.report import build_report  # pandas and matplotlib only when a report is made

        report = build_report(parent.client, uri, out_dir, run_id=parent.run_id, require_finished=False)
        for path in report.files:
            parent.artifact(path, "report")
        log.info("report: %s (artifacts report/ of run %s)", report.html, parent.run_id)
    except Exception as exc:
        log.warning("report: not made (%s: %s); the sweep's runs are unaffected", type(exc).__name__, exc)


def close_parent(status: str) -> None:
    """Terminate our parent run once: at the sweep's end, on Ctrl-C (KILLED), or when Hydra stopped
    the sweep with an error (e.g. a bad value in the second job's overrides)."""
    if STATE.parent is None or STATE.adopted or STATE.closed:
        return
    STATE.closed = True
    try:
        STATE.parent.finish(status)
    except Exception as exc:  # the store may be what failed; never mask the original problem
        log.warning("could not mark the parent run %s: %s", status, exc)
