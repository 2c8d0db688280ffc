"""dlbench entry point: `python src/run.py [-m] key=value ...` (Hydra).

Thin on purpose: compose the config (Hydra), hand each job to the orchestrator, and turn the sweep's
outcome into an exit code: 0 all jobs finished, 1 a job failed, 130 interrupted.
"""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run from a checkout without installing

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from dlbench.config import JobConfig, register_configs  # noqa: E402
from dlbench.orchestrator import JobContext, run_job  # noqa: E402
from dlbench.tracking import sweep  # noqa: E402

register_configs()


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> str:
    hc = HydraConfig.get()
    plain = OmegaConf.to_container(cfg, resolve=True)
    job = JobConfig.from_dict(plain)
    label = f"job {hc.job.num}" if hc.mode.name == "MULTIRUN" else "job"
    label += f" [{job.framework.name} {job.model.name} {job.precision.name} {job.mode}]"
    ctx = JobContext(
        output_dir=Path(hc.runtime.output_dir),
        overrides=list(hc.overrides.task),
        label=label,
        config_yaml=OmegaConf.to_yaml(plain),
    )
    return run_job(job, ctx)


def _expand_mlproject_args(argv: list[str]) -> list[str]:
    """`mlflow run` passes the MLproject's `overrides` parameter as one quoted word; split it."""
    if len(argv) >= 2 and argv[1] == "--mlproject":
        return [argv[0], *shlex.split(" ".join(argv[2:]))]
    return argv


def cli() -> int:
    sys.argv = _expand_mlproject_args(sys.argv)
    try:
        main()
    except KeyboardInterrupt:
        sweep.close_parent("KILLED")
        logging.getLogger("dlbench").warning("interrupted")
        return 130
    except SystemExit:  # Hydra reported an error (already printed) and is exiting
        sweep.close_parent("FAILED")
        raise
    if sweep.STATE.failed:
        print(
            f"dlbench: {len(sweep.STATE.failed)} job(s) failed: {', '.join(sweep.STATE.failed)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli())
