"""Gluon networks, one module per task (classification.py, ...), found by the bench as
`models.<model.task>` (dlbench.backends.skeleton.load_family). A module provides
`build_model(cfg, train) -> HybridBlock` (uninitialized; called with the task spec's inputs in order)
and `initialize(net, cfg, ctx)`, and may provide `infer(net, inputs) -> outputs`."""

from __future__ import annotations

from typing import Any


def trainable_params(net: Any) -> int:
    """Parameters that receive gradients (BatchNorm running statistics excluded, as in torch)."""
    total = 0
    for p in net.collect_params().values():
        if p.grad_req != "null":
            size = 1
            for d in p.shape:
                size *= d
            total += size
    return total
