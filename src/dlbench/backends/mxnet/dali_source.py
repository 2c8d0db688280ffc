"""DALI-fed input for the MXNet bench: `next() -> Batch((x,), (y,), batch size)` on the bench's context.

DALI >= 1.40 has no MXNet plugin, so this is a small iterator over `pipe.run()` (host-synchronous
outputs; DALI still prefetches `data.prefetch` batches ahead). On a GPU context the batch is handed
over by DLPack (`mx.nd.from_dlpack`, zero copy); on the CPU it is copied once from DALI's buffer
(a numpy view) into an NDArray, because DALI reuses that buffer. x is NCHW (Gluon's layout), y
float32 labels of shape (N,) (Gluon's softmax cross-entropy picks with float indices). Pipeline failures
are explained by the skeleton (backends.skeleton.ExplainedSource).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbench.backends.mxnet._compat import mx
from dlbench.config import JobConfig
from dlbench.core.bench import Batch
from dlbench.data.pipelines import ImagePipeline
from dlbench.workloads.detection.coco_pipeline import CocoPipeline


class DaliSource:
    """Image batches from the job's dataset through DALI (dlbench.data.pipelines)."""

    def __init__(self, job: JobConfig, ctx: Any, dtype: str, layout: str = "NCHW") -> None:
        """ctx: the bench's mx.Context; dtype: what the pipeline emits (the precision plan's input_dtype)."""
        self.ctx = ctx
        self.on_gpu = ctx.device_type == "gpu"
        self.pipeline = ImagePipeline(
            job, ctx.device_id if self.on_gpu else None, layout, dtype, label_dtype="float32"
        )
        self.skipped = self.pipeline.skipped

    def _to_mx(self, out: Any) -> Any:
        tensor = out.as_tensor()
        if self.on_gpu:
            return mx.nd.from_dlpack(tensor.__dlpack__())
        view = np.asarray(tensor)  # no copy: DALI's buffer
        return mx.nd.array(view, ctx=self.ctx, dtype=view.dtype)  # synchronous copy into MXNet

    def next(self) -> Batch:
        x, y = self.pipeline.pipe.run()
        return Batch((self._to_mx(x),), (self._to_mx(y),), self.pipeline.batch_size)

    def close(self) -> None:
        self.pipeline.close()


class CocoSource(DaliSource):
    """Detection batches (COCO layout) through DALI (dlbench.workloads.detection.coco_pipeline): x NCHW as above;
    targets loc (N, 4, anchors) and labels (N, anchors) as float32 (Gluon picks with float indices).
    mode=infer reads the held-out split and has no targets."""

    def __init__(self, job: JobConfig, ctx: Any, dtype: str, layout: str = "NCHW") -> None:
        self.ctx = ctx
        self.on_gpu = ctx.device_type == "gpu"
        self.pipeline = CocoPipeline.from_job(job, ctx.device_id if self.on_gpu else None, layout, dtype)
        self.skipped = self.pipeline.skipped

    def next(self) -> Batch:
        x, *rest = self.pipeline.pipe.run()
        targets = (
            (self._to_mx(rest[0]), self._to_mx(rest[1]).astype("float32")) if self.pipeline.train else ()
        )
        return Batch((self._to_mx(x),), targets, self.pipeline.batch_size)
