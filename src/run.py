"""dlbench entry point: `python src/run.py [-m] key=value ...` (Hydra).

Thin on purpose: compose the config (Hydra), hand each job to the orchestrator, and turn the sweep's
outcome into an exit code: 0 all jobs finished (cells this machine cannot run are skipped, each with its
reason, and do not count as failures), 1 a job failed, 2 a refused override, 130 stopped by
SIGINT, 143 by SIGTERM. The signal handlers go in before the heavy imports, whatever disposition the
process inherited (a background job inherits SIGINT ignored), so Ctrl-C is honoured from the start.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run from a checkout without installing

from dlbench import signals  # noqa: E402  (small: only the standard library)

signals.install()
try:
    import logging
    import shlex
    from collections.abc import Callable
    from typing import Any

    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig, OmegaConf

    from dlbench.config import JobConfig, register_configs
    from dlbench.core.execution import cell_label
    from dlbench.core.masked_output import mask_output
    from dlbench.core.secrets import hide_in_overrides
    from dlbench.orchestrator import JobContext, run_job
    from dlbench.overrides import check_overrides
    from dlbench.tracking import sweep

    signals.check()  # a signal during the imports: stop before anything is made
except KeyboardInterrupt as exc:
    print(f"dlbench: stopped by {getattr(exc, 'name', 'SIGINT')} while starting; nothing was recorded")
    sys.exit(signals.exit_code(exc))

register_configs()


def run_one(cfg: DictConfig, tally: sweep.SweepTally) -> str:
    """Hydra's task function: one composed job, counted in the invocation's tally."""
    hc = HydraConfig.get()
    plain = OmegaConf.to_container(cfg, resolve=True)
    job = JobConfig.from_dict(plain)
    label = f"job {hc.job.num}" if hc.mode.name == "MULTIRUN" else "job"
    label += f" [{cell_label(job)}]"
    ctx = JobContext(
        output_dir=Path(hc.runtime.output_dir),
        overrides=list(hc.overrides.task),
        label=label,
        config_yaml=OmegaConf.to_yaml(plain),
    )
    return run_job(job, ctx, tally)


def hydra_main(tally: sweep.SweepTally) -> Callable[[], Any]:
    """Hydra's entry for this invocation: the task function closes over `tally` (no global state)."""

    def task(cfg: DictConfig) -> str:
        return run_one(cfg, tally)

    task.tally = tally  # a launcher running jobs in other processes counts their outcomes here

    return hydra.main(version_base="1.3", config_path="../conf", config_name="config")(task)


def _expand_mlproject_args(argv: list[str]) -> list[str]:
    """`mlflow run` passes the MLproject's `overrides` parameter as one quoted word; split it."""
    if len(argv) >= 2 and argv[1] == "--mlproject":
        return [argv[0], *shlex.split(" ".join(argv[2:]))]
    return argv


def cli() -> int:
    sys.argv = hide_in_overrides(_expand_mlproject_args(sys.argv))  # Hydra never sees a secret
    mask_output()  # nor prints one: MLflow's and urllib3's lines carry the resolved URI
    tally = sweep.SweepTally()
    try:
        refused = check_overrides(sys.argv[1:])
        if refused:
            print(f"dlbench: {refused}", file=sys.stderr)
            return 2
        hydra_main(tally)()
        signals.check()  # a signal during the last job's cleanup still ends the sweep KILLED
        sweep.finish_sweep(tally)  # a multirun's parent: counts, report, status (no-op otherwise)
        signals.check()
    except KeyboardInterrupt as exc:
        sweep.close_parent("KILLED")
        name = getattr(exc, "name", "SIGINT")
        if sweep.STATE.job_runs or sweep.STATE.parent is not None:
            what = "the running job and the sweep are marked KILLED, their worker is gone"
        else:
            what = "no run had been made yet, so nothing was recorded"
        logging.getLogger("dlbench").warning("stopped by %s: %s", name, what)
        return signals.exit_code(exc)
    except SystemExit:  # Hydra reported an error (already printed) and is exiting
        sweep.close_parent("FAILED")
        raise
    if tally.not_run:
        print(
            f"dlbench: {len(tally.not_run)} cell(s) not run on this machine (reasons above and in the "
            f"report): {', '.join(tally.not_run)}",
            file=sys.stderr,
        )
    if tally.failed:
        print(f"dlbench: {len(tally.failed)} job(s) failed: {', '.join(tally.failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli())
