"""The project's own files agree with each other: pins, MLproject, Makefile commands."""

from __future__ import annotations

import yaml

from tests.conftest import ROOT


def pins(lines: list[str]) -> set[str]:
    return {line.strip() for line in lines if "==" in line and not line.strip().startswith("#")}


def test_conda_env_has_the_same_pins_as_requirements():
    conda = yaml.safe_load((ROOT / "conda.yaml").read_text())
    pip = next(d["pip"] for d in conda["dependencies"] if isinstance(d, dict))
    assert pins(pip) == pins((ROOT / "requirements.txt").read_text().splitlines())


def test_mlproject_entry_point_runs_the_cli_with_split_overrides():
    project = yaml.safe_load((ROOT / "MLproject").read_text())
    assert project["conda_env"] == "conda.yaml"
    assert project["entry_points"]["main"]["command"].startswith("python src/run.py --mlproject ")


def test_numpy_is_pinned_below_2_for_mxnet():
    assert "numpy==1.26.4" in pins((ROOT / "requirements.txt").read_text().splitlines())
