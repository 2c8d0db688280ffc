"""dlbench's launchers on hydra-submitit-launcher (hydra/launcher=submitit_slurm | submitit_local).

The plugin runs each Hydra job as a submitit job: on a SLURM node, or in a process of its own on this
machine. dlbench adds what a benchmark sweep needs on top:
- the jobs import this checkout's dlbench (PYTHONPATH), as the worker processes do;
- the sweep's parent run is made in the sweep's process before any job is submitted, and its id reaches
  every job (inherited environment; an `export` line in SLURM's script);
- in the job's process, SIGTERM (SLURM at the time limit) and SIGUSR2 (submitit's warning `signal_delay_s`
  before it) end the job as Ctrl-C does (dlbench.signals): the run is closed KILLED with what was
  measured, the worker's process group is killed, and the job returns normally so the sweep goes on;
- each job's outcome comes back to the sweep's process, which counts it (exit code, parent run status);
- on one machine, jobs run one at a time: a benchmark must not share the machine with the next job.

Hydra accepts launchers only from the `hydra_plugins` namespace, hence this package's place; Hydra's
plugin scan imports it in every run, so dlbench itself is imported only when a launcher is used.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher

log = logging.getLogger("dlbench")


def export_checkout() -> None:
    """Jobs run `python -m submitit.core._submit`: make them import this checkout's dlbench."""
    from dlbench.supervisor import SRC_DIR

    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(SRC_DIR) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_DIR), *paths) if p)


def count_outcomes(tally: Any, returns: Sequence[JobReturn], first_idx: int) -> None:
    """Count each job in the sweep's tally (src/run.py's, held by its task function) from what the job
    returned: the run's status (run.py's task function returns it)."""
    for i, ret in enumerate(returns):
        label = f"job {first_idx + i} [{' '.join(ret.overrides or [])}]"
        tally.add(label, _outcome(ret), fail_fast=False)


class _DlbenchJobs:
    """Mixed into the plugin's launchers (before them in the MRO)."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from dlbench.tracking.sweep import PARENT_ENV, ensure_parent

        export_checkout()
        parent = ensure_parent()  # in this process: every job finds its id in the environment
        if parent is not None and isinstance(self.params.get("setup"), list):
            self.params["setup"] = [*self.params["setup"], f"export {PARENT_ENV}={parent.run_id}"]
        returns = self._launch(job_overrides, initial_job_idx)
        tally = getattr(self.task_function, "tally", None)
        if tally is not None:
            count_outcomes(tally, returns, initial_job_idx)
        return returns

    def _launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        return super().launch(job_overrides, initial_job_idx)  # type: ignore[misc]

    def __call__(self, *args: Any, **kwargs: Any) -> JobReturn:
        """Runs in the job's own process, where submitit ignores SIGTERM and requeues on SIGUSR2."""
        from dlbench import signals
        from dlbench.core.masked_output import mask_output

        signals.install(extra=(signal.SIGUSR2,))
        mask_output()  # the job resolves the secrets the sweep's command line hid (dlbench.core.secrets)
        try:
            return super().__call__(*args, **kwargs)  # type: ignore[misc]
        except KeyboardInterrupt as exc:  # the run is closed KILLED already (orchestrator)
            log.warning("job stopped by %s", getattr(exc, "name", "SIGINT"))
            return JobReturn(
                overrides=list(args[0]) if args else None, status=JobStatus.COMPLETED, _return_value="KILLED"
            )


class DlbenchSlurmLauncher(_DlbenchJobs, SlurmLauncher):
    """One SLURM job per Hydra job, all submitted at once (array_parallelism caps how many run)."""

    def _launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        missing = [tool for tool in ("sbatch", "srun") if shutil.which(tool) is None]
        if missing:
            raise CompactHydraException(
                f"hydra/launcher=submitit_slurm needs SLURM ({' and '.join(missing)} not on PATH): run the "
                "sweep on the cluster's login node, or use hydra/launcher=submitit_local on this machine"
            )
        return super()._launch(job_overrides, initial_job_idx)


class DlbenchLocalLauncher(_DlbenchJobs, LocalLauncher):
    """The same path on this machine, one job at a time."""

    def _launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from dlbench import signals

        returns: list[JobReturn] = []
        for i, overrides in enumerate(job_overrides):
            signals.check()  # a safe point between jobs (waiting on one, the signals' alarm stops us)
            ret = LocalLauncher.launch(self, [overrides], initial_job_idx + i)
            returns += ret
            if self.config is not None and self.config.get("fail_fast") and _failed(ret[0]):
                log.warning("fail_fast=true: %d remaining job(s) skipped", len(job_overrides) - i - 1)
                break
        return returns


def _outcome(ret: JobReturn) -> str:
    """FINISHED, NOT_RUN (a cell its machine cannot run, not a failure) or FAILED."""
    if ret.status == JobStatus.COMPLETED and ret._return_value in ("FINISHED", "NOT_RUN"):
        return ret._return_value
    return "FAILED"


def _failed(ret: JobReturn) -> bool:
    return _outcome(ret) == "FAILED"
