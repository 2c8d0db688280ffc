"""The TensorFlow family base: what a workload's tensorflow.py (workloads/<task>/tensorflow.py) provides,
with defaults. A workload subclasses TFFamily once and overrides what differs from a plain classifier."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from dlbench.backends.tensorflow.losses import LossFn, make_loss
from dlbench.core.spec import ModelConfig, TaskSpec


def call_model(model: keras.Model, inputs: tuple, training: bool) -> Any:
    """Keras takes one input as a tensor and several as a list (in the task spec's order)."""
    return model(inputs[0] if len(inputs) == 1 else list(inputs), training=training)


class TFFamily:
    """One workload in Keras/TensorFlow. `build_model` is required; the rest has a classifier's default."""

    framework = "tf"
    # True for an `infer` that runs a host loop (greedy decoding reads a device flag per step): the bench
    # must run it eagerly instead of tracing it into one tf.function
    eager_infer = False

    def build_model(self, cfg: ModelConfig, float_dtype: str = "float32") -> keras.Model:
        """The network; float inputs arrive as float_dtype, inputs in the task spec's order, images NHWC."""
        raise NotImplementedError(f"{type(self).__name__}.build_model")

    def infer(self, model: keras.Model, inputs: tuple) -> Any:
        """One inference step's outputs (default: the forward pass in inference mode)."""
        return call_model(model, inputs, False)

    def compile_infer(self, model: keras.Model, jit_compile: bool) -> None:
        """An `eager_infer` compiles its own pieces with XLA when framework.xla asks (the bench cannot
        trace a host loop); the default infer is traced by the bench and needs nothing here."""

    def loss(self, spec: TaskSpec) -> LossFn:
        """loss(outputs, *targets) -> scalar: the spec's generic loss kind unless the workload has its own."""
        return make_loss(spec)

    def dali_source(self, bench: Any) -> Any:
        """The real-data source when the dataset is read by DALI (default: the image classification one)."""
        from dlbench.backends.tensorflow.dali_source import DaliSource

        return DaliSource(bench.job, bench._tf_device, bench.prec.plan.input_dtype)

    def run_facts(self, model: keras.Model) -> dict[str, Any]:
        """Facts about the network as built (e.g. its attention kernel), recorded with the run."""
        return {}

    def load_seeded_weights(self, model: keras.Model, cfg: ModelConfig, seed: int) -> bool:
        """Any mode: the seed's framework-neutral initial weights; False where the workload has none."""
        return False

    def add_negatives(self, inputs: tuple, spec: TaskSpec) -> tuple[tuple, tuple]:
        """A train step's full batch from positives, drawn on the device (TaskSpec.device_negatives)."""
        raise NotImplementedError(f"{type(self).__name__} draws no negatives")

    def export_weights(self, model: keras.Model) -> dict[str, np.ndarray]:
        """The weights under framework-neutral names (the cross-framework tests exchange them)."""
        raise NotImplementedError(f"{type(self).__name__}.export_weights")

    def load_weights(self, model: keras.Model, weights: dict[str, np.ndarray]) -> None:
        """Load weights given under the neutral names of `export_weights`."""
        raise NotImplementedError(f"{type(self).__name__}.load_weights")


def trainable_params(model: keras.Model) -> int:
    """Trainable parameter count (BN moving statistics excluded, like torch's buffers)."""
    return int(sum(np.prod(v.shape) for v in model.trainable_weights))
