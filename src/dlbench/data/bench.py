"""`mode=data`: the input pipeline alone, timed like a model (samples/s), no framework involved.

A Bench (dlbench.backends.base) whose step() fetches one batch from the job's DALI pipeline. The
pipeline is the one the framework's job would get (same layout, dtype, decode placement, threads
and prefetch), so "data" throughput is the ceiling the loader puts on that training job. Outputs of
`Pipeline.run()` are host-synchronous (also for GPU outputs), so sync() has nothing left to wait for.
For detection (model=ssd300 on COCO) it is the COCO pipeline's train graph: reader, random IoU crop,
flip, colour twist, resize and DALI's box encoder, what an SSD training job waits for.
"""

from __future__ import annotations

from typing import Any

from dlbench.config import JobConfig
from dlbench.core.bench import Batch, ExplainedSource, TimedSource
from dlbench.core.precision import plan_precision
from dlbench.data.pipelines import cuda_device_count
from dlbench.data.registry import data_format
from dlbench.data.validate import DatasetLayout
from dlbench.errors import BackendUnavailable, ConfigError


def preferred_layout(framework: str, on_gpu: bool) -> str:
    """The layout each framework's model consumes: TF NHWC; torch channels_last (NHWC) on a GPU,
    NCHW on the CPU; MXNet NCHW."""
    if framework == "tf" or (framework == "torch" and on_gpu):
        return "NHWC"
    return "NCHW"


class _PipelineRuns:
    """One batch = one `pipe.run()`; its outputs are kept as the batch's inputs (alive until the next)."""

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline
        self.skipped = pipeline.skipped

    def next(self) -> Batch:
        return Batch(tuple(self.pipeline.pipe.run()), (), self.pipeline.batch_size)

    def close(self) -> None:
        self.pipeline.close()


class DataBench:
    """Bench protocol over a DALI pipeline: one step = one batch delivered."""

    def __init__(self, job: JobConfig) -> None:
        gpus = 0 if job.device == "cpu" else cuda_device_count()
        if job.device == "cuda" and gpus == 0:
            raise BackendUnavailable("device=cuda: DALI sees no CUDA GPU here; use device=cpu or device=auto")
        device_id = 0 if gpus else None
        self.device = "cuda:0" if gpus else "cpu"
        self.unit = "images"
        layout = preferred_layout(job.framework.name, gpus > 0)
        dtype = plan_precision(job.precision, "cuda" if gpus else "cpu").input_dtype
        fmt = data_format(job)  # its pipeline: e.g. the image reader, or COCO's with SSD's augmentations
        if fmt.pipeline is None:
            raise ConfigError(f"mode=data: no DALI pipeline reads dataset.format={fmt.name}")
        self.pipeline: Any = fmt.pipeline(job, device_id, layout, dtype)
        layout_found = getattr(self.pipeline, "dataset", None)  # the image reader detects a null format
        self.format = layout_found.format if isinstance(layout_found, DatasetLayout) else fmt.name
        self.source = TimedSource(ExplainedSource(_PipelineRuns(self.pipeline)))
        self._outputs: Batch | None = None

    def step(self) -> None:
        self._outputs = self.source.next()

    def sync(self) -> None:
        """Nothing to wait for: run() returned host-synchronous outputs."""

    def units(self) -> int:
        return self.source.units

    def loss(self) -> float | None:
        return None

    def data_wait_s(self) -> float:
        return self.source.wait_s  # all of a data step is waiting for data

    def memory(self) -> int | None:
        return None

    def precision_report(self) -> dict[str, Any]:
        return {"compute_dtype": self.pipeline.dtype}  # what the pipeline emits: no model computes here

    def run_facts(self) -> dict[str, Any]:
        import nvidia.dali

        p = self.pipeline
        return {
            "layout": p.layout,
            "decode": p.decode,
            "dataset_format": self.format,
            "data_samples": p.num_samples,
            "data_skipped": p.skipped,
            "dali": nvidia.dali.__version__,
        }

    def params(self) -> int:
        return 0

    def close(self) -> None:
        self._outputs = None
        self.source.close()


# The worker treats this module as the backend for mode=data (build + versions, as backends do).
def build(job: JobConfig) -> DataBench:
    return DataBench(job)


def versions() -> dict[str, str]:
    import nvidia.dali

    return {"dali": nvidia.dali.__version__}
