"""Machine translation with the Transformer (Vaswani et al. 2017): source and target ids in, logits over
the shared vocabulary out, label-smoothed cross-entropy, Adam with the paper's inverse-square-root
warm-up, measured in target tokens per second (fairseq's / DeepLearningExamples' unit), sentences per
second beside it. Batches are formed by token count, so their shapes and unit counts vary step to step:
the task makes its own host batches (workloads/translation/source.py) for synthetic and real data alike.
Inference is greedy decoding (the families' `infer`, workloads/translation/<fw>.py), counted in generated tokens.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from dlbench.core.execution import COMPILED, execution, execution_class
from dlbench.core.spec import ModelConfig, OptimizerSpec, TaskSpec, TensorSpec, count_nonzero
from dlbench.workloads.translation.token_batches import FIRST_ID
from dlbench.workloads.translation.transformer import PAD, SIZES, TransformerSize, peak_lr, size

LENGTHS = ("lognormal", "fixed")
# greedy decoding's loop over positions: host (one call per position, every framework) | device (the whole
# decode one compiled call: TF under XLA, JAX under jit)
DECODE_LOOPS = ("host", "device")
DEVICE_LOOP_FRAMEWORKS = {"tf": "framework.xla=true", "jax": "framework.jit=true"}
WARMUP = 4000


@dataclass
class TranslationConfig(ModelConfig):
    """conf/model/transformer.yaml (Hydra schema `translation_schema`)."""

    name: str = "transformer"
    task: str = "translation"
    size: str = "base"  # tiny | base | big (dlbench.workloads.translation.transformer.SIZES)
    vocab: int = 32000  # shared source/target vocabulary (real data: the BPE model is trained to this size)
    batch_tokens: int = 5120  # tokens per batch (DLE: 5,120 per GPU); 0 = model.batch_size sentences
    batch_size: int = 64  # sentences per batch when batch_tokens is 0
    lengths: str = "lognormal"  # synthetic sentence lengths: lognormal (measured shape) | fixed (= max_len)
    max_len: int = 64  # longest sentence kept (tokens); synthetic fixed length; FLOP-count length
    dropout: float = 0.1
    warmup: int = WARMUP  # Adam's warm-up steps (the paper: 4,000)
    lr: float | None = None  # peak learning rate; null = the paper's d_model^-0.5 * warmup^-0.5
    decode_loop: str = "host"  # greedy decoding: host (a call per position) | device (one compiled call)

    def check(self) -> list[tuple[bool, str]]:
        return [
            *super().check(),
            (self.size in SIZES, f"model.size={self.size}: choose one of {', '.join(SIZES)}"),
            (self.vocab > FIRST_ID, f"model.vocab={self.vocab}: must be more than {FIRST_ID}"),
            (
                self.batch_tokens >= 0,
                f"model.batch_tokens={self.batch_tokens}: use 0 (batch by sentences) or more",
            ),
            (self.lengths in LENGTHS, f"model.lengths={self.lengths}: choose one of {', '.join(LENGTHS)}"),
            (self.max_len >= 2, f"model.max_len={self.max_len}: must be 2 or more"),
            (
                self.batch_tokens == 0 or self.batch_tokens > self.max_len,
                f"model.batch_tokens={self.batch_tokens}: must exceed model.max_len={self.max_len}",
            ),
            (0.0 <= self.dropout < 1.0, f"model.dropout={self.dropout}: must be in [0, 1)"),
            (self.warmup >= 1, f"model.warmup={self.warmup}: must be 1 or more"),
            (self.lr is None or self.lr > 0, f"model.lr={self.lr}: must be > 0 (or null: the paper's)"),
            (
                self.decode_loop in DECODE_LOOPS,
                f"model.decode_loop={self.decode_loop}: choose one of {', '.join(DECODE_LOOPS)}",
            ),
        ]


def unsupported(job: Any) -> str | None:
    """Why this job's framework and execution mode cannot decode as model.decode_loop asks, or None: the
    whole decode in one compiled call is written for TF under XLA and JAX under jit (a loop the compiler
    sees whole); PyTorch and MXNet decode from the host. Training never decodes, so it is never refused."""
    if getattr(job.model, "decode_loop", "host") != "device" or job.mode == "train":
        return None
    fw = job.framework.name
    if fw not in DEVICE_LOOP_FRAMEWORKS:
        return (
            f"model.decode_loop=device: framework={fw} decodes from the host, one call per position; the "
            f"whole decode as one compiled call is built for framework={' and '.join(DEVICE_LOOP_FRAMEWORKS)}"
        )
    if execution_class(execution(fw, dataclasses.asdict(job.framework))) != COMPILED:
        return (
            f"model.decode_loop=device decodes in one compiled call: framework={fw} needs "
            f"execution=compiled ({DEVICE_LOOP_FRAMEWORKS[fw]})"
        )
    return None


def model_size(cfg: TranslationConfig) -> TransformerSize:
    """The network's hyper-parameters: the named size with this config's vocabulary and dropout."""
    return size(cfg.size, vocab=cfg.vocab, dropout=cfg.dropout)


def spec(cfg: TranslationConfig) -> TaskSpec:
    from dlbench.workloads.translation.source import TranslationBatches

    def ids(axis: str) -> TensorSpec:
        return TensorSpec((axis,), "int32", FIRST_ID, cfg.vocab)

    d_model = SIZES[cfg.size].d_model if cfg.size in SIZES else 512
    return TaskSpec(
        task="translation",
        inputs={"src": ids("src_len"), "tgt_in": ids("tgt_len")},
        targets={"tgt_out": ids("tgt_len")},
        loss="label_smoothed_cross_entropy",
        loss_args={"smoothing": 0.1, "ignore_index": PAD},
        metric="bleu",
        optimizer=OptimizerSpec(
            "adam",
            lr=cfg.lr or peak_lr(d_model, cfg.warmup),
            betas=(0.9, 0.98),
            eps=1e-9,
            warmup_steps=cfg.warmup,
            decay="inverse_sqrt",
        ),  # fmt: skip
        unit="target tokens",
        count_units=count_nonzero("tgt_out"),
        axes={"src_len": cfg.max_len, "tgt_len": cfg.max_len},
        batches=TranslationBatches,
        infer_unit="generated tokens",
    )
