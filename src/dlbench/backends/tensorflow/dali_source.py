"""DALI-fed input for the TensorFlow bench: `next() -> Batch((x,), (y,), batch size)` on the bench's device.

`nvidia.dali.plugin.tf.DALIDataset` runs the pipeline inside a TF op (it ships the serialized graph
to TF, which builds its own DALI pipeline), placed on the bench's device: with a GPU the batch is
made on it and never visits the host. x is NHWC (Keras' channels_last), y int32 labels, shape (N,).
`dataset` is a tf.data.Dataset too, for benches that iterate inside a tf.function. Pipeline failures
are explained by the skeleton (backends.skeleton.ExplainedSource).
"""

from __future__ import annotations

import tensorflow as tf
from nvidia.dali.plugin.tf import DALIDataset

from dlbench.config import JobConfig
from dlbench.core.bench import Batch
from dlbench.data.pipelines import ImagePipeline
from dlbench.workloads.detection.coco_pipeline import CocoPipeline


class DaliSource:
    """Image batches from the job's dataset through DALI (dlbench.data.pipelines)."""

    def __init__(self, job: JobConfig, tf_device: str, dtype: str, layout: str = "NHWC") -> None:
        """tf_device: "/CPU:0" or "/GPU:0" (the bench's device); dtype: what the pipeline emits, the
        precision plan's input_dtype."""
        on_gpu = "GPU" in tf_device.upper()
        device_id = int(tf_device.rsplit(":", 1)[-1]) if on_gpu else None
        self.pipeline = ImagePipeline(job, device_id, layout, dtype, label_dtype="int32", build=False)
        self.skipped = self.pipeline.skipped
        p, bs, size = self.pipeline, self.pipeline.batch_size, job.model.image_size
        shape = (bs, size, size, 3) if layout == "NHWC" else (bs, 3, size, size)
        self.tf_device = tf_device
        with tf.device(tf_device):
            self.dataset = DALIDataset(
                pipeline=p.pipe,
                batch_size=bs,
                output_shapes=(shape, (bs,)),
                output_dtypes=(tf.float16 if p.dtype == "float16" else tf.float32, tf.int32),
                device_id=device_id,
                num_threads=job.data.num_threads,
                prefetch_queue_depth=job.data.prefetch,
            )
            self._it = iter(self.dataset)

    def next(self) -> Batch:
        with tf.device(self.tf_device):
            x, y = next(self._it)
        return Batch((x,), (y,), self.pipeline.batch_size)

    def close(self) -> None:
        self._it = None
        self.dataset = None
        self.pipeline.close()


class CocoSource(DaliSource):
    """Detection batches (COCO layout) through DALI (dlbench.workloads.detection.coco_pipeline): x NHWC as above;
    targets loc (N, 4, anchors) float32 and labels (N, anchors) int32, encoded by DALI's box encoder.
    mode=infer reads the held-out split and has no targets."""

    def __init__(self, job: JobConfig, tf_device: str, dtype: str, layout: str = "NHWC") -> None:
        on_gpu = "GPU" in tf_device.upper()
        device_id = int(tf_device.rsplit(":", 1)[-1]) if on_gpu else None
        self.pipeline = p = CocoPipeline.from_job(job, device_id, layout, dtype)
        self.skipped = p.skipped
        bs, size, anchors = p.batch_size, p.dboxes.fig_size, p.dboxes.count
        image = (bs, size, size, 3) if layout == "NHWC" else (bs, 3, size, size)
        x_type = tf.float16 if dtype == "float16" else tf.float32
        shapes, types = ((image, (bs, 4, anchors), (bs, anchors)), (x_type, tf.float32, tf.int32))
        if not p.train:
            shapes, types = (image, (bs,)), (x_type, tf.int32)
        self.tf_device = tf_device
        with tf.device(tf_device):
            self.dataset = DALIDataset(
                pipeline=p.pipe, batch_size=bs, output_shapes=shapes, output_dtypes=types, device_id=device_id,
                num_threads=job.data.num_threads, prefetch_queue_depth=job.data.prefetch,
            )  # fmt: skip
            self._it = iter(self.dataset)

    def next(self) -> Batch:
        with tf.device(self.tf_device):
            x, *rest = next(self._it)
        return Batch((x,), tuple(rest) if self.pipeline.train else (), self.pipeline.batch_size)
