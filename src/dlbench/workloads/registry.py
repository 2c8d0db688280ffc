"""The registry of workloads: `model.task` -> its model-config schema, its spec builder, the package
holding its per-framework families, and the quality metrics its spec can name (mode=converge).

A workload registers itself from its package's `__init__.py` (`register(Workload(...))`). The registry
finds them on first use: every package under dlbench/workloads/, plus the modules named in
$DLBENCH_WORKLOADS (comma-separated; e.g. the test-only workload under tests/, which the tests register
this way so that the worker processes find it too). A package registers its data formats the same way
(dlbench.data.registry). docs/architecture.md, "Adding a workload".
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dlbench.core.spec import ModelConfig, TaskSpec

EXTRA_ENV = "DLBENCH_WORKLOADS"
# framework.name -> the module of a workload package that holds that framework's family
FRAMEWORK_MODULES = {"torch": "torch", "tf": "tensorflow", "mxnet": "mxnet", "jax": "jax"}


class Metric(NamedTuple):
    """A quality metric: the name it is logged under (`eval/<name>`, the report) and `fn(outputs, labels)`,
    numpy, higher is better; fn may return {name: value, other: value}, the others logged beside it.
    `fraction`: a value in [0, 1], whose differences the report states in points (x 100)."""

    name: str
    fn: Callable[[Any, Any], float | dict[str, float]]
    fraction: bool = False


@dataclass(frozen=True)
class Workload:
    task: str
    config: type[ModelConfig]  # the model keys of this family (a Hydra schema of group `model`)
    spec: Callable[[ModelConfig], TaskSpec]
    package: str  # the package of its framework modules: <package>.torch, <package>.tensorflow, ...
    test_only: bool = False  # no conf/ option; built by tests only
    metrics: Mapping[str, Metric] = field(default_factory=dict)  # TaskSpec.metric kind -> its metric
    # the keys of the family's smallest config (a few milliseconds a step on a CPU): the contract test
    # (tests/unit/test_task_contract.py) drives every registered workload with it, in every framework
    smallest: Mapping[str, Any] = field(default_factory=dict)
    # unsupported(job) -> why a job of this workload cannot run in its framework and execution mode (a
    # model option only some frameworks build), or None; the capability check skips such a cell in one line
    unsupported: Callable[[Any], str | None] | None = None

    def smallest_config(self) -> ModelConfig:
        """`config(**smallest)`: the configuration the contract test runs."""
        return self.config(**self.smallest)


_REGISTERED: dict[str, Workload] = {}
_FIND_LOCK = threading.RLock()
_found = False


def register(workload: Workload) -> Workload:
    """Add a workload (called by its package on import); the same task twice must be the same entry."""
    known = _REGISTERED.setdefault(workload.task, workload)
    if known != workload:
        raise ValueError(f"workload {workload.task!r} registered twice ({known.package}, {workload.package})")
    return workload


def _find() -> None:
    """Import every workload package once (each registers itself), then the extra modules named in the
    environment. Under a lock, and marked done only when every import is: a second thread asking while the
    first imports would otherwise see half a registry (a task's model schema then falls back to ModelConfig
    and its fields are silently dropped). Reentrant: a package may ask the registry while it imports."""
    global _found
    with _FIND_LOCK:
        if _found:
            return
        here = os.path.dirname(__file__)
        for module in pkgutil.iter_modules([here]):
            if module.ispkg:
                importlib.import_module(f"{__package__}.{module.name}")
        for name in filter(None, (n.strip() for n in os.environ.get(EXTRA_ENV, "").split(","))):
            importlib.import_module(name)
        _found = True


def workloads() -> dict[str, Workload]:
    """Every registered workload by task name, in name order."""
    _find()
    return dict(sorted(_REGISTERED.items()))


def unknown_task(name: str) -> str | None:
    """A one-line message for a task name that is not registered, else None."""
    if name in workloads():
        return None
    known = sorted(k for k, w in workloads().items() if not w.test_only)
    return f"model.task={name!r}: no such task; use one of {known}"


def task_spec(cfg: ModelConfig) -> TaskSpec:
    """The spec of the workload `cfg` describes."""
    return workloads()[cfg.task].spec(cfg)


def model_config_type(task: str) -> type[ModelConfig]:
    """The model-config dataclass of `task` (ModelConfig itself for an unknown task: validate says why)."""
    found = workloads().get(task)
    return found.config if found else ModelConfig


def metric(kind: str) -> Metric:
    """The metric a spec names (`TaskSpec.metric`), from the workload that registered it."""
    for entry in workloads().values():
        if kind in entry.metrics:
            return entry.metrics[kind]
    known = sorted(k for w in workloads().values() for k in w.metrics)
    raise KeyError(f"metric {kind!r}: no workload registers it; registered: {known}")


def fraction_metrics() -> set[str]:
    """The names of the registered metrics that are fractions in [0, 1]."""
    return {m.name for w in workloads().values() for m in w.metrics.values() if m.fraction}


def family_module(framework: str, task: str) -> str:
    """The module holding `task`'s family in `framework` (it may not exist: the framework lacks it)."""
    return f"{workloads()[task].package}.{FRAMEWORK_MODULES[framework]}"
