"""Hydra launchers beyond one process: hydra-submitit-launcher's SLURM and local executors.

conf/hydra/launcher/submitit_slurm.yaml and submitit_local.yaml are dlbench's presets of the plugin's
launchers of the same names. Hydra 1.3 still validates a config file against a ConfigStore node of the
same name (deprecated since 1.1, with a warning on every run, and impossible for a file that also sets
`hydra.sweeper`), so the plugin's nodes move to `<name>_schema`, which the presets extend.
`dlbench.slurm_minutes` derives the scheduler's time limit from the job's own `timeout_s`.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from omegaconf import OmegaConf

# Beyond the worker's own limit (timeout_s per repeat): interpreter start-up, the MLflow run's opening and
# closing, the telemetry upload; and submitit's warning signal comes `signal_delay_s` before the end.
SLURM_MARGIN_MIN = 10


def slurm_minutes(timeout_s: float, repeats: int = 1) -> int:
    """The job's time limit in minutes: every repeat may use timeout_s, plus the margin."""
    return math.ceil(float(timeout_s) * max(int(repeats), 1) / 60) + SLURM_MARGIN_MIN


def activate_script() -> str:
    """The activate script of the environment running the sweep (its compute nodes run the same one)."""
    return str(Path(sys.prefix) / "bin" / "activate")


def register_launchers() -> None:
    """Register the plugin's launcher schemas under `<name>_schema`, and the time-limit resolver.
    Without the plugin installed there is nothing to register: the presets then fail to compose with
    Hydra's message naming the missing config."""
    if not OmegaConf.has_resolver("dlbench.slurm_minutes"):
        OmegaConf.register_new_resolver("dlbench.slurm_minutes", slurm_minutes)
        OmegaConf.register_new_resolver("dlbench.activate", activate_script)
    try:
        from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf, SlurmQueueConf
    except ImportError:
        return
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    Plugins.instance()  # Hydra's plugin scan (once per process) re-executes the plugin's store() calls
    cs = ConfigStore.instance()
    launchers = cs.repo.get("hydra", {}).get("launcher", {})
    for name, node in (("submitit_slurm", SlurmQueueConf), ("submitit_local", LocalQueueConf)):
        launchers.pop(f"{name}.yaml", None)
        cs.store(group="hydra/launcher", name=f"{name}_schema", node=node, provider="submitit_launcher")
