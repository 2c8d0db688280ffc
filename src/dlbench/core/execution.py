"""Execution mode: how a framework runs the step, an axis of every framework comparison.

Frameworks are compared like with like: compiled with compiled (torch.compile, TensorFlow's XLA, jax.jit),
eager or graph with eager or graph (PyTorch eager, JAX's op-by-op dispatch, a tf.function without XLA,
MXNet imperative or hybridized). A run records its mode as the tag `run.execution`; the report keeps the
two classes in separate tables and says so when a set of runs mixes them.

`execution=eager|compiled` (top-level, default null = each framework's own knobs) is the framework-neutral
switch a sweep crosses with `framework=`: it sets torch's `framework.compile`, TensorFlow's `framework.xla`
and JAX's `framework.jit`. MXNet has no whole-graph compiler (its capability check skips
`execution=compiled`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

COMPILED, UNCOMPILED = "compiled", "eager/graph"
EXECUTIONS = (None, "eager", "compiled")
# framework -> its knob that compiles the step (set by execution=eager|compiled)
COMPILE_KNOB = {"torch": "compile", "tf": "xla", "jax": "jit"}


def _on(value: Any) -> bool:
    return str(value).lower() in ("true", "1")


def execution(framework: str, knobs: Mapping[str, Any]) -> str:
    """The mode a job of `framework` with framework knobs `knobs` (config values or MLflow params) runs in:
    eager, graph, hybridized, xla or torch.compile(<mode>)."""
    if framework == "torch":
        return (
            f"torch.compile({knobs.get('compile_mode', 'default')})" if _on(knobs.get("compile")) else "eager"
        )
    if framework == "tf":
        return "xla" if _on(knobs.get("xla")) else "graph"
    if framework == "mxnet":
        return "hybridized" if _on(knobs.get("hybridize", True)) else "eager"
    if framework == "jax":
        return "jit" if _on(knobs.get("jit", True)) else "eager"
    return "eager"


def execution_class(mode: str) -> str:
    """compiled (a compiler sees the whole step) or eager/graph (ops dispatched one by one, or a graph
    executor without whole-step compilation)."""
    return COMPILED if mode == "xla" or mode.startswith("torch.compile") or mode == "jit" else UNCOMPILED


def apply_execution(framework: Any, chosen: str | None) -> None:
    """Set the framework's compile knob from execution=eager|compiled (None leaves the knobs alone)."""
    knob = COMPILE_KNOB.get(framework.name)
    if chosen is not None and knob is not None:
        setattr(framework, knob, chosen == "compiled")


def cell_execution(framework: Any, chosen: str | None) -> str:
    """The mode a job runs in, from its framework config and execution=eager|compiled (before or after
    apply_execution): what tells a sweep's eager and compiled cells apart in its log lines."""
    knobs = SimpleNamespace(**vars(framework))
    apply_execution(knobs, chosen)
    return execution(framework.name, vars(knobs))


def cell_label(job: Any) -> str:
    """A job's cell as its log lines and the sweep's not-run notes name it: framework, model, precision,
    mode and execution mode, e.g. `torch resnet50 amp train torch.compile(default)`."""
    return (
        f"{job.framework.name} {job.model.name} {job.precision.name} {job.mode} "
        f"{cell_execution(job.framework, job.execution)}"
    )
