"""The submitit presets compose through real Hydra: the SLURM time limit comes from timeout_s, each job
gets one GPU, the environment's activation is a setup line; the plugin's same-named schemas no longer
shadow dlbench's presets (no deprecation warning, dlbench's launcher classes)."""

from __future__ import annotations

import sys
import warnings

import pytest

from dlbench.launchers import SLURM_MARGIN_MIN, slurm_minutes


def test_slurm_minutes_covers_every_repeat_and_a_margin():
    assert slurm_minutes(3600) == 60 + SLURM_MARGIN_MIN
    assert slurm_minutes(61, repeats=3) == 4 + SLURM_MARGIN_MIN  # 183 s -> 4 minutes, rounded up
    assert slurm_minutes(300, repeats=0) == 5 + SLURM_MARGIN_MIN


def launcher(compose, *overrides: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Hydra's "validated against ConfigStore schema" would raise
        cfg = compose(list(overrides), hydra=True)
    return cfg.hydra.launcher


def test_slurm_preset(compose):
    lc = launcher(compose, "hydra/launcher=submitit_slurm", "timeout_s=900", "schedule.repeats=2")
    assert lc._target_ == "hydra_plugins.dlbench_submitit.DlbenchSlurmLauncher"
    assert lc.timeout_min == 30 + SLURM_MARGIN_MIN
    assert (lc.nodes, lc.tasks_per_node, lc.gpus_per_node) == (1, 1, 1)  # one job per task, one GPU each
    assert lc.max_num_timeout == 0 and lc.signal_delay_s == 120
    assert list(lc.setup) == [f"source {sys.prefix}/bin/activate"]
    assert (
        launcher(compose, "hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu").partition == "gpu"
    )


def test_local_preset(compose):
    lc = launcher(compose, "hydra/launcher=submitit_local", "timeout_s=60")
    assert lc._target_ == "hydra_plugins.dlbench_submitit.DlbenchLocalLauncher"
    assert lc.timeout_min == 1 + SLURM_MARGIN_MIN and lc.gpus_per_node == 1


def test_a_mistyped_launcher_key_is_refused(compose):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        compose(["hydra/launcher=submitit_slurm", "hydra.launcher.partitoin=gpu"], hydra=True)
