"""The registry of data formats: `dataset.format` -> how the orchestrator checks it, how the worker opens it,
whether it is held in memory or streamed, whether DALI feeds it, and which tasks read it.

Everything that branches on a format asks this table instead. The generic formats (synthetic data and the
image formats DALI reads) register from `data/generic_formats.py`; a workload package registers its own
(`register_format(DataFormat(...))` in its `__init__.py`, beside `register(Workload(...))`), so a new format
is a new entry, not an edit of the harness. The registry finds them on first use, with the workloads
(dlbench.workloads.registry). Pure Python: the checks and readers a format names import their libraries
(DALI, PIL) only when they run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlbench.errors import ConfigError

SYNTHETIC = "synthetic"  # dataset=synthetic: the spec's own batches (dataset.format stays null)
DETECT = "folder"  # a real dataset of a task with no default format: the image reader detects the layout


@dataclass(frozen=True)
class DataFormat:
    """One row of the table. `check(job) -> facts` runs in the orchestrator before a worker starts (one-line
    ConfigError; it may write the resolved path into `job.dataset.path`); `open(bench, to_device) -> source`
    makes the bench's input source in the worker; `pipeline(job, device_id, layout, dtype)` is the DALI
    pipeline that mode=data times (None: no DALI reads this format)."""

    name: str
    check: Callable[[Any], dict[str, Any]]
    open: Callable[[Any, Callable[[Any], Any]], Any]
    in_memory: bool  # read whole into memory with numpy: mode=converge's data (else streamed)
    pipeline: Callable[..., Any] | None = None
    tasks: tuple[str, ...] = ()  # the tasks that read it; () = every task
    default_for: tuple[str, ...] = ()  # tasks whose real dataset has this format when dataset.format is null
    about: str = ""  # what it is, for the docs and for messages

    @property
    def dali(self) -> bool:
        """A DALI pipeline feeds it: only then does a job need DALI (and a dataset.path)."""
        return self.pipeline is not None

    def reads(self, task: str) -> bool:
        return not self.tasks or task in self.tasks


_REGISTERED: dict[str, DataFormat] = {}
_found = False


def register_format(fmt: DataFormat) -> DataFormat:
    """Add a format (called by its package on import); a name registered twice must be the same entry."""
    known = _REGISTERED.setdefault(fmt.name, fmt)
    if known is not fmt:
        raise ValueError(f"data format {fmt.name!r} registered twice")
    return fmt


def _find() -> None:
    """Import the generic formats and every workload package (each registers its own formats) once."""
    global _found
    if _found:
        return
    _found = True
    importlib.import_module("dlbench.data.generic_formats")
    from dlbench.workloads.registry import workloads

    workloads()


def formats() -> dict[str, DataFormat]:
    """Every registered format by name, in name order."""
    _find()
    return dict(sorted(_REGISTERED.items()))


def data_format(job: Any) -> DataFormat:
    """The format of `job`'s dataset: synthetic for dataset=synthetic, else `dataset.format`, else (null) the
    format its task declares as default, else the image reader, which detects the layout on disk."""
    ds, task = job.dataset, job.model.task
    known = formats()
    if ds.name == SYNTHETIC:
        return known[SYNTHETIC]
    if ds.format is None:
        return next((f for f in known.values() if task in f.default_for), known[DETECT])
    if ds.format not in known:
        names = [n for n in known if n != SYNTHETIC]
        raise ConfigError(
            f"dataset.format={ds.format!r}: no such format; use one of {names} (or null to detect)"
        )
    return known[ds.format]


def wrong_task(fmt: DataFormat, job: Any) -> str | None:
    """One line when `job`'s task does not read `fmt`, naming the models that do and the formats the job's
    task reads; else None."""
    task = job.model.task
    if fmt.reads(task):
        return None
    models = " or ".join(f"model={m}" for t in fmt.tasks for m in conf_options("model", "task", t))
    read = [n for n, f in formats().items() if n != SYNTHETIC and task in f.tasks]
    return (
        f"dataset={job.dataset.name} (format={fmt.name}) is {'/'.join(fmt.tasks)} data: use "
        f"{models or 'a ' + '/'.join(fmt.tasks) + ' model'} with it, not model={job.model.name} (task {task}, "
        f"which reads dataset=synthetic or format {_listed(read)})"
    )


def conf_options(group: str, key: str, value: str) -> list[str]:
    """The conf/<group> options whose yaml sets `key: value` (e.g. the datasets of a format, the models of
    a task), for messages: read only when one is made."""
    import yaml

    from dlbench.core.names import CONF_DIR

    return sorted(
        p.stem
        for p in (CONF_DIR / group).glob("*.yaml")
        if (yaml.safe_load(p.read_text()) or {}).get(key) == value
    )


def _listed(names: list[str]) -> str:
    """'idx (dataset=fashion_mnist) or ratings (dataset=movielens)': formats with their conf options."""
    shown = []
    for name in names:
        options = ", ".join(f"dataset={d}" for d in conf_options("dataset", "format", name))
        shown.append(f"{name} ({options})" if options else name)
    return " or ".join(shown) or "none registered"


def mode_problem(fmt: DataFormat, job: Any) -> str | None:
    """One line when `job.mode` cannot run on `fmt` (mode=converge needs data held in memory, mode=data a
    DALI pipeline), listing the registered formats that it can run on; else None."""
    if job.mode == "converge" and not fmt.in_memory:
        fit = [n for n, f in formats().items() if f.in_memory and f.reads(job.model.task)]
        return (
            f"mode=converge trains to quality on a real dataset held in memory: use a dataset of format "
            f"{_listed(fit)} (not dataset={job.dataset.name})"
        )
    if job.mode == "data" and not fmt.dali:
        fit = [n for n, f in formats().items() if f.dali]
        return (
            f"mode=data measures a DALI input pipeline; dataset={job.dataset.name} has none: use a dataset "
            f"of format {_listed(fit)}"
        )
    return None
