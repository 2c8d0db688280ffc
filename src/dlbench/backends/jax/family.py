"""The JAX family base: what a workload's jax.py (workloads/<task>/jax.py) provides, with defaults.

A Flax module holds no weights: the bench keeps them in a `Network` (the module and its variables,
`params` plus any state such as `batch_stats`), which is what the family's methods take as "model". A
workload subclasses JaxFamily once and overrides what differs from a plain classifier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dlbench.backends.jax.losses import LossFn, make_loss
from dlbench.core.spec import ModelConfig, TaskSpec


@dataclass
class Network:
    """A Flax module and its variables ({"params": ..., "batch_stats": ...})."""

    module: nn.Module
    variables: dict[str, Any] = field(default_factory=dict)

    @property
    def params(self) -> Any:
        return self.variables["params"]


class JaxFamily:
    """One workload in JAX. `build_model` is required; every other method has the default a classifier
    needs. Inputs arrive in the spec's order, float inputs with layout "CHW" moved to channels last."""

    framework = "jax"
    # True for an `infer` that runs a host loop (greedy decoding) over calls it jits itself: the bench
    # must call it as it is instead of tracing it into one jitted function
    eager_infer = False

    def build_model(self, cfg: ModelConfig, dtype: Any, param_dtype: Any) -> nn.Module:
        """The Flax module computing in `dtype` with weights in `param_dtype`."""
        raise NotImplementedError(f"{type(self).__name__}.build_model")

    def init(self, module: nn.Module, rng: jax.Array, inputs: tuple) -> dict[str, Any]:
        """The module's initial variables for example inputs."""
        return dict(module.init({"params": rng, "dropout": rng}, *inputs, train=False))

    def forward(
        self, net: Network, variables: dict, inputs: tuple, train: bool, rng: jax.Array
    ) -> tuple[Any, dict]:
        """(outputs, updated non-parameter variables): training mode updates batch statistics and draws
        dropout from `rng`; inference mode changes nothing."""
        if not train:
            return net.module.apply(variables, *inputs, train=False), {}
        mutable = [k for k in variables if k != "params"]
        out, new = net.module.apply(variables, *inputs, train=True, rngs={"dropout": rng}, mutable=mutable)
        return out, dict(new)

    def infer(self, net: Network, variables: dict, inputs: tuple) -> Any:
        """One inference step's outputs (default: the forward pass; e.g. greedy decoding overrides)."""
        return net.module.apply(variables, *inputs, train=False)

    def compile_infer(self, jit: bool) -> None:
        """An `eager_infer` jits its own pieces when framework.jit asks (the bench cannot trace a host
        loop); the default infer is jitted by the bench and needs nothing here."""

    def loss(self, spec: TaskSpec) -> LossFn:
        """loss(outputs, *targets) -> scalar: the spec's generic loss kind unless the workload has its own."""
        return make_loss(spec)

    def dali_source(self, bench: Any) -> Any:
        """The real-data source when the dataset is read by DALI (default: the image classification one),
        through DALI's JAX plugin."""
        from dlbench.backends.jax.dali_source import DaliSource

        return DaliSource(bench.job, bench.dev, bench.prec)

    def run_facts(self, net: Network) -> dict[str, Any]:
        return {}

    def load_seeded_weights(self, net: Network, cfg: ModelConfig, seed: int) -> bool:
        """Any mode: put the seed's framework-neutral initial weights in; False where the workload
        has none (JAX's PRNG key from the seed initialises it)."""
        return False

    def add_negatives(self, inputs: tuple, spec: TaskSpec, rng: jax.Array) -> tuple[tuple, tuple]:
        """A train step's full batch from positives, drawn on the device (TaskSpec.device_negatives)."""
        raise NotImplementedError(f"{type(self).__name__} draws no negatives")

    def export_weights(self, net: Network) -> dict[str, np.ndarray]:
        raise NotImplementedError(f"{type(self).__name__}.export_weights")

    def load_weights(self, net: Network, weights: dict[str, np.ndarray]) -> None:
        raise NotImplementedError(f"{type(self).__name__}.load_weights")


def channels_last(array: Any, layout: str | None) -> Any:
    """Flax convolutions are NHWC: a "C.." per-sample layout moves C to the end, of a numpy array on the
    host or of a JAX array where it lives."""
    if layout and layout[0] == "C" and array.ndim == len(layout) + 1:
        if isinstance(array, np.ndarray):
            return np.ascontiguousarray(np.moveaxis(array, 1, -1))
        return jnp.moveaxis(array, 1, -1)
    return array


def example_inputs(spec: TaskSpec, float_dtype: Any) -> tuple[np.ndarray, ...]:
    """Zero inputs of batch 1 in the spec's order (variable axes at their `axes` size), channels last:
    what a module is initialised and counted on."""
    return tuple(
        channels_last(
            np.zeros((1, *spec.sample_shape(t)), dtype=float_dtype if t.is_float else np.int32), t.layout
        )
        for t in spec.inputs.values()
    )
