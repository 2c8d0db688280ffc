"""The registry of tasks: `model.task` -> its model-config schema and its spec builder.

A task is one module here (a `<Family>Config(ModelConfig)` dataclass and `spec(cfg) -> TaskSpec`) plus
one model module per framework, backends/<fw>/models/<task>.py. docs/architecture.md, "How to add a
workload", lists the steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dlbench.core.spec import ModelConfig, TaskSpec
from dlbench.tasks import classification, detection, recommendation, test_mlp, translation


@dataclass(frozen=True)
class Task:
    config: type[ModelConfig]  # the model keys of this family (a Hydra schema of group `model`)
    spec: Callable[[ModelConfig], TaskSpec]
    test_only: bool = False  # no conf/ option; built by tests only


TASKS: dict[str, Task] = {
    "classification": Task(classification.ClassificationConfig, classification.spec),
    "detection": Task(detection.DetectionConfig, detection.spec),
    "recommendation": Task(recommendation.RecommendationConfig, recommendation.spec),
    "test_mlp": Task(test_mlp.MLPConfig, test_mlp.spec, test_only=True),
    "translation": Task(translation.TranslationConfig, translation.spec),
}


def unknown_task(name: str) -> str | None:
    """A one-line message for a task name that is not registered, else None."""
    if name in TASKS:
        return None
    known = sorted(k for k, t in TASKS.items() if not t.test_only)
    return f"model.task={name!r}: no such task; use one of {known}"


def task_spec(cfg: ModelConfig) -> TaskSpec:
    """The spec of the workload `cfg` describes."""
    return TASKS[cfg.task].spec(cfg)


def model_config_type(task: str) -> type[ModelConfig]:
    """The model-config dataclass of `task` (ModelConfig itself for an unknown task: validate says why)."""
    return TASKS[task].config if task in TASKS else ModelConfig


__all__ = ["TASKS", "ModelConfig", "Task", "TaskSpec", "model_config_type", "task_spec", "unknown_task"]
