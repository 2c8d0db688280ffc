"""The contract between the worker and a built workload, and the timed input source every bench uses.

A backend's `build(job)` returns a `Bench`; the worker times `Bench.step()` (dlbench.timing) and never
looks inside the model. A step consumes one `Batch` from a `TimedSource`, which counts on the host the
throughput units the batch holds (images, target tokens, samples: the task spec says which and how), so
the timing windows sum what the steps really processed without asking the device anything.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Batch:
    """One step's data, already on the bench's device, in the task spec's input/target order.

    units: the throughput units this batch holds (e.g. its image count, or its non-padding target
    tokens), counted on the host when the batch was made: never a device read."""

    inputs: tuple[Any, ...]
    targets: tuple[Any, ...]
    units: int


@runtime_checkable
class Bench(Protocol):
    """One built workload: model, optimizer, data and precision set up on the device."""

    device: str  # "cpu" or "cuda:0": where it really runs
    unit: str  # the throughput unit of `units()`: "images", "target tokens", "samples"

    def step(self) -> None:
        """One train step (forward, loss, backward, update) or one inference batch. Must not sync."""

    def sync(self) -> None:
        """Block until all queued device work has finished."""

    def units(self) -> int:
        """Throughput units consumed by all steps so far (host count; the windows take differences)."""

    def loss(self) -> float | None:
        """The last step's loss as a host float (None for inference). Called at window edges only."""

    def data_wait_s(self) -> float:
        """Seconds spent waiting for input since the start (about 0 for synthetic data)."""

    def memory(self) -> int | None:
        """Framework allocator peak in bytes on the device, None where the framework has none."""

    def precision_report(self) -> dict[str, Any]:
        """What numeric precision is really in effect, read from real layer outputs after a step.
        Keys: compute_dtype (required), first_layer, first_layer_dtype, last_layer, last_layer_dtype,
        param_dtype, autocast, loss_scale, TF32 flags (backends.skeleton.LayerRecord)."""

    def run_facts(self) -> dict[str, Any]:
        """How the run was set up apart from precision: optimizer, memory format, compiled / xla /
        hybridized, data_skipped... (MLflow tags `run.*`)."""

    def params(self) -> int:
        """Number of trainable parameters."""

    def close(self) -> None:
        """Release the data pipeline and device memory."""


class TimedSource:
    """A bench's input source (synthetic or real) with its fetches timed and its units counted, so that
    every backend reports `data_wait_s` and throughput units the same way; it also says how many corrupt
    samples a real source skipped. The wrapped source has `next() -> Batch` and `close()`."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.wait_s = 0.0
        self.units = 0

    def next(self) -> Batch:
        t = time.perf_counter()
        batch = self.source.next()
        self.wait_s += time.perf_counter() - t
        self.units += batch.units
        return batch

    def facts(self) -> dict[str, Any]:
        """{"data_skipped": n} for a source that can skip undecodable samples, else {}."""
        skipped = getattr(self.source, "skipped", None)
        return {} if skipped is None else {"data_skipped": skipped}

    def close(self) -> None:
        self.source.close()


class ExplainedSource:
    """A real (DALI-fed) source whose failures are explained once, here, for every framework and for
    mode=data: an undecodable image becomes the error its pipeline's `explain(exc)` returns (a
    CorruptImageError naming the file); any other error passes unchanged. The wrapped source has
    `.pipeline` (with `explain`), optionally `.skipped`, `next() -> Batch` and `close()`."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.skipped = getattr(source, "skipped", None)

    def next(self) -> Batch:
        try:
            return self.source.next()
        except Exception as exc:
            if (err := self.source.pipeline.explain(exc)) is not None:
                raise err from exc
            raise

    def close(self) -> None:
        self.source.close()
