"""mode=converge: train for `schedule.epochs` over a real dataset and score the model on its held-out
split after every epoch, so a run says how good the model got, not only how fast it trained.

Worker side, `run_epochs`: each epoch's training is one timed window (device-synchronized at its edges,
`timing.timed_window`), so train throughput is measured as in mode=train (the median over epochs; the
first epoch includes compilation, there is no separate warm-up: a warm-up step would train off the seeded
plan). After each window the bench predicts the held-out split (numpy outputs) and the workload's eval module
scores it: an `epoch` event. Evaluation time is not training time.

Orchestrator side, `converge_summary`: the final and best value, and the epochs and training seconds it
took to reach `schedule.target`. A task names its metric kind in its spec (`TaskSpec.metric`); its workload
registers the kind with the name it is logged under (`eval/<name>`) and the numpy function that computes it
(`workloads.registry.metric`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dlbench import events
from dlbench.timing import timed_window

EVAL_BATCH = 500  # held-out samples per predict call (memory only: the metric does not depend on it)


def evaluate(bench: Any, score: Callable[[Any, Any], Any]) -> Any:
    """The metric of the bench's model on its in-memory source's held-out split. A source whose outputs
    are not one array to concatenate (translation: ids of varying width, scored as text;
    detection: loc and conf, joined one by one) joins them itself (`join_outputs`)."""
    source = bench.in_memory
    outputs = [bench.predict(batch) for batch in source.eval_batches(EVAL_BATCH)]
    return score(getattr(source, "join_outputs", np.concatenate)(outputs), source.eval_labels)


def run_epochs(bench: Any, epochs: int, emit: Callable[..., None], on_first_step=None) -> None:
    """Train `epochs` epochs from the bench's in-memory source, evaluating after each."""
    from dlbench.data.registry import formats
    from dlbench.workloads.registry import metric

    if bench.in_memory is None:
        held = [n for n, f in formats().items() if f.in_memory]
        raise ValueError(
            f"mode=converge needs a dataset held in memory: a dataset of format {' or '.join(held)}"
        )
    found = metric(bench.spec.metric)
    name, score = found.name, found.fn
    train_s = 0.0
    for epoch in range(1, epochs + 1):
        hook = on_first_step if epoch == 1 else None
        start = time.perf_counter()
        timed_window(bench, epoch - 1, bench.in_memory.steps_per_epoch, emit, hook)
        train_s += time.perf_counter() - start
        t = time.perf_counter()
        value = evaluate(bench, score)
        extra = {k: v for k, v in value.items() if k != name} if isinstance(value, dict) else {}
        emit(
            events.EPOCH,
            epoch=epoch,
            metric=name,
            value=value[name] if isinstance(value, dict) else value,
            extra=extra,
            train_loss=bench.loss(),
            train_s=train_s,
            eval_s=time.perf_counter() - t,
        )


def _finite(x: Any) -> bool:
    return x is not None and math.isfinite(x)


def converge_summary(epochs: list[dict[str, Any]], target: float | None) -> dict[str, float]:
    """Summary metrics of a converge run from its `epoch` events (empty when none arrived)."""
    if not epochs:
        return {}
    values = [e["value"] for e in epochs]
    finite = [v for v in values if _finite(v)]
    out = {"eval_final": values[-1], "train_s": epochs[-1]["train_s"], "epochs_done": float(len(epochs))}
    if finite:
        best = max(finite)
        out |= {"eval_best": best, "eval_best_epoch": float(epochs[values.index(best)]["epoch"])}
    if target is not None:
        hit = next((e for e in epochs if _finite(e["value"]) and e["value"] >= target), None)
        if hit is not None:
            out |= {"epochs_to_target": float(hit["epoch"]), "time_to_target_s": hit["train_s"]}
    return out


def diverged(epochs: list[dict[str, Any]]) -> bool:
    """Some epoch's training loss or held-out metric was NaN or inf."""
    return any(
        not _finite(e["value"]) or (e["train_loss"] is not None and not _finite(e["train_loss"]))
        for e in epochs
    )
