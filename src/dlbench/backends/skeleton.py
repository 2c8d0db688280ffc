"""What every framework's bench shares, written once and framework-free (docs/architecture.md, section 3):
the task spec, the input source its data format opens (data/registry.py) behind a TimedSource, `units()` and
`data_wait_s()`, the model-family lookup and the record of which layers showed which dtype. A framework's bench subclasses `SpecBench` and adds only what differs: device,
precision translation, model building, the step, sync and memory.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from dlbench.config import JobConfig
from dlbench.core.bench import Batch, TimedSource
from dlbench.data.registry import data_format
from dlbench.data.synthetic import HostBatch, PoolSource
from dlbench.errors import BackendUnavailable, ConfigError
from dlbench.workloads.registry import family_module, task_spec

F = TypeVar("F")


def load_family(base: type[F], task: str) -> F:
    """The family of `task` in the framework of `base` (TorchFamily, TFFamily, MXNetFamily): the one class
    derived from `base` in workloads/<task>/<framework>.py, instantiated."""
    name = family_module(base.framework, task)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise BackendUnavailable(
            f"framework={base.framework} model.task={task}: this framework has no {task} models yet "
            f"({name.replace('.', '/')}.py)"
        ) from None
    found = [
        c for c in vars(module).values() if isinstance(c, type) and issubclass(c, base) and c is not base
    ]
    if len(found) != 1:
        raise TypeError(
            f"{name} must define one {base.__name__} subclass, found {[c.__name__ for c in found]}"
        )
    return found[0]()


class HostSource:
    """A task's own host batches (TaskSpec.batches), each put on the device when the step asks for it:
    the shapes and unit counts may change from step to step. Batches that announce how many distinct
    `shapes` they have hand out one of each first, and the warm-up covers them (`SpecBench.warmup_steps`).
    Batches that announce a `pool` (synthetic data: that many batches are the whole data) are put on the
    device once, here, before timing, and handed out in turn, as PoolSource does: a per-step copy from
    pageable host memory waits for the GPU to finish the step before, which cost a host-bound model
    (Transformer-base on an H200) 15% against a loop that keeps its synthetic batches on the device."""

    def __init__(self, batches: Iterator[HostBatch], to_device: Callable[[HostBatch], Batch]) -> None:
        self.batches, self.to_device = batches, to_device
        self.shapes: int = getattr(batches, "shapes", 0)  # 0: not announced
        self.samples = self.units = 0  # rows (e.g. sentences) and units (e.g. target tokens) handed out
        self.seen: set[tuple] = set()  # distinct input shapes handed out
        size = getattr(batches, "pool", 0)
        self.pool = PoolSource([self._placed(next(batches)) for _ in range(size)]) if size else None

    def _placed(self, host: HostBatch) -> tuple[int, tuple, Batch]:
        arrays = list(host.inputs.values())
        return len(arrays[0]), tuple(a.shape for a in arrays), self.to_device(host)

    def next(self) -> Batch:
        rows, shapes, batch = self.pool.next() if self.pool else self._placed(next(self.batches))
        self.samples += rows
        self.units += batch.units
        self.seen.add(shapes)
        return batch

    def facts(self) -> dict[str, Any]:
        """samples per unit over the batches used (sentences per target token: sentences/s = throughput x
        it), the number of distinct batch shapes the run met (each one compiled / autotuned once) and,
        for a pool, how many batches it held on the device."""
        if not self.units:
            return {}
        pool = {"device_pool": len(self.pool.batches)} if self.pool else {}
        return {
            "samples_per_unit": round(self.samples / self.units, 6),
            "batch_shapes": len(self.seen),
        } | pool

    def close(self) -> None:
        self.batches, self.pool = iter(()), None


@dataclass(frozen=True)
class LayerSeen:
    name: str
    kind: str  # the framework's layer or op type, e.g. Conv2d, Dense, Embedding, FullyConnected
    dtype: str


class LayerRecord:
    """The first and last weight-carrying layers a real step ran, with the dtype of their real outputs.
    Normalization layers are not offered (frameworks keep them float32 by design); lookups (embeddings)
    are recorded but do not set compute_dtype: their output has the weights' dtype, not the math's."""

    def __init__(self) -> None:
        self.first: LayerSeen | None = None
        self.last: LayerSeen | None = None
        self.first_compute: LayerSeen | None = None

    def see(self, name: str, kind: str, dtype: str, lookup: bool = False) -> None:
        seen = LayerSeen(name, kind, dtype)
        if self.first is None:
            self.first = seen
        self.last = seen
        if self.first_compute is None and not lookup:
            self.first_compute = seen

    def facts(self) -> dict[str, Any]:
        """compute_dtype (the first computing layer's output dtype) and the first/last layers seen."""
        out: dict[str, Any] = {"compute_dtype": self.first_compute.dtype if self.first_compute else "unknown"}
        for key, seen in (("first_layer", self.first), ("last_layer", self.last)):
            if seen is not None:
                out[key] = f"{seen.name} ({seen.kind})"
                out[f"{key}_dtype"] = seen.dtype
        return out


class SpecBench:
    """The framework-free half of a bench. Subclasses set `device` and call `open_source` once their
    device and precision are known; they implement step, sync, loss, memory, precision_report, params
    and close, and extend run_facts."""

    device: str = "cpu"
    # Devices this process feeds in one step (JAX's mesh): its batch is that many per-device batches, one
    # after another. 1 for one device, and for each rank of a job whose devices are processes (torch).
    local_devices: int = 1

    def __init__(self, job: JobConfig) -> None:
        self.job = job
        self.spec = task_spec(job.model)
        self.train = job.mode in ("train", "converge")
        # mode=train only: batches hold positives and the step draws this many negatives each on the device
        # (the family's add_negatives); mode=converge trains on host-drawn, seeded negatives instead
        self.device_negatives = self.spec.device_negatives if job.mode == "train" else 0
        self.unit = self.spec.unit if self.train or not self.spec.infer_unit else self.spec.infer_unit
        self.family_facts: dict[str, Any] = {}  # what the model family reports (e.g. its attention kernels)
        self.source: TimedSource | None = None
        self.in_memory: Any = None  # the MemorySource of an in-memory dataset (mode=converge evaluates on it)
        self.init = "framework default"  # how the initial weights were made (run fact `init`)
        self.family: Any = None

    def load_family(self, base: type[F]) -> F:
        """This job's workload in the bench's framework (`base`: that framework's family base class)."""
        self.family = load_family(base, self.spec.task)
        return self.family

    def open_source(self, to_device: Callable[[HostBatch], Batch]) -> None:
        """The job's input source, as its data format opens it (data/registry.py: synthetic batches made
        once and put on the device by `to_device`, a DALI pipeline through the family's `dali_source`, or a
        dataset held in memory, which mode=converge also evaluates on). A task that makes its own batches
        (TaskSpec.batches: they vary step to step) is fed from those, except when it trains to quality on a
        dataset held in memory."""
        fmt = data_format(self.job)
        source: Any
        if self.spec.batches is not None and not (fmt.in_memory and self.job.mode == "converge"):
            source = HostSource(self.spec.batches(self.job, self.spec), to_device)
        else:
            source = fmt.open(self, to_device)
            self.in_memory = source if fmt.in_memory else None
        self.source = TimedSource(source)

    def with_negatives(self, inputs: tuple, targets: tuple) -> tuple[tuple, tuple]:
        """A train step's full batch: the positives plus the negatives (and labels) the family draws on
        the device, where the task asks for it (device_negatives), else the batch as it came."""
        if not self.device_negatives:
            return inputs, targets
        return self.family.add_negatives(inputs, self.spec)

    def units(self) -> int:
        return self.source.units if self.source else 0

    def ranks_facts(self) -> dict[str, Any]:
        """What a bench driving several devices from this one process records as `ranks.*` (JAX's mesh);
        {} otherwise (torch's ranks record theirs from the process group, backends/torch/ranks.py)."""
        return {}

    def warmup_steps(self, requested: int) -> int:
        """Warm-up steps: at least one per batch shape of a source that announces its shapes (they come
        first), so no shape is first met, compiled or autotuned inside a timed window."""
        inner = getattr(self.source, "source", None)
        return max(requested, inner.shapes) if isinstance(inner, HostSource) else requested

    def data_wait_s(self) -> float:
        return self.source.wait_s if self.source else 0.0

    def seed_weights(self, model: Any) -> None:
        """`model.init_weights` (any mode): the file's framework-neutral weights, the same numbers in every
        framework. Else the run seed's initial weights, where the family draws them framework-free
        (`load_seeded_weights`, e.g. the small CNN). Else the framework's own draw, which the caller seeded
        with schedule.seed: a run's curve repeats, and another seed is another draw. All of it in every mode."""
        if self.job.model.init_weights is not None:
            self.init = self._load_init_weights(model, self.job.model.init_weights)
            return
        seed = self.job.schedule.seed
        if self.family.load_seeded_weights(model, self.job.model, seed):
            self.init = f"numpy from seed {seed} (stream 'init'), identical in every framework"
        else:
            self.init = f"{self.job.framework.name} RNG seeded with {seed}"

    def _load_init_weights(self, model: Any, path: str) -> str:
        """Load the .npz at `path` through the family's exchange; any problem is one line (ConfigError)."""
        what = f"model.init_weights={path}"
        try:
            with np.load(path) as npz:
                weights = {k: npz[k] for k in npz.files}
            self.family.load_weights(model, weights)
        except NotImplementedError:
            raise ConfigError(
                f"{what}: model={self.job.model.name} has no framework-neutral weight exchange in "
                f"{self.job.framework.name} yet; drop model.init_weights to start from its own initialisation"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{what}: cannot load it ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                "give an .npz written from the model's export_weights"
            ) from None
        return f"weights file {path} (framework-neutral), identical in every framework"

    def run_facts(self) -> dict[str, Any]:
        facts = {"task": self.spec.task, "unit": self.unit, **(self.source.facts() if self.source else {})}
        inner = getattr(self.source, "source", None)
        facts |= self.family_facts | (inner.facts() if isinstance(inner, HostSource) else {})
        facts["init"] = self.init
        if self.device_negatives:
            facts["negatives"] = f"{self.device_negatives} per positive, on the device, the framework's RNG"
        return facts | (self.in_memory.facts() if self.in_memory is not None else {})

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
