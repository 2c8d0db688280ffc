"""TEST ONLY (no conf/ option): a 2-layer MLP on a flat vector, binary target, sigmoid BCE, Adam with a
warm-up and inverse-square-root decay, measured in samples. It exists to prove that a task needs one
spec, one model module per framework and a registry line, and the contract test drives it through all
three frameworks (tests/unit/test_task_contract.py)."""

from __future__ import annotations

from dataclasses import dataclass

from dlbench.core.spec import ModelConfig, OptimizerSpec, TaskSpec, TensorSpec, count_batch


@dataclass
class MLPConfig(ModelConfig):
    name: str = "mlp"
    task: str = "test_mlp"
    batch_size: int = 8
    features: int = 16
    hidden: int = 32

    def check(self) -> list[tuple[bool, str]]:
        return [*super().check(), (self.features >= 1 and self.hidden >= 1, "model.features/hidden: >= 1")]


def spec(cfg: MLPConfig) -> TaskSpec:
    return TaskSpec(
        task="test_mlp",
        inputs={"x": TensorSpec((cfg.features,))},
        targets={"y": TensorSpec((), "int32", 0, 2)},
        loss="sigmoid_binary_cross_entropy",
        metric="accuracy",
        optimizer=OptimizerSpec(
            "adam", lr=1e-3, betas=(0.9, 0.98), eps=1e-9, warmup_steps=4, decay="inverse_sqrt"
        ),
        unit="samples",
        count_units=count_batch,
    )
