"""Translation's data format (data/registry.py): a parallel corpus, two aligned text files per split, read
and BPE-encoded once with numpy. Speed modes take their token batches from the spec (TaskSpec.batches);
mode=converge reads the corpus's epochs and held-out pairs (workloads/translation/epochs.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlbench.data.registry import DataFormat

PARALLEL_TEXT = "parallel_text"


def check_parallel_text(job: Any) -> dict[str, Any]:
    from dlbench.workloads.translation.source import check_corpus

    return check_corpus(job)


def open_parallel_text(bench: Any, to_device: Callable[[Any], Any]) -> Any:
    from dlbench.workloads.translation.epochs import TranslationEpochs

    return TranslationEpochs(bench.job, bench.spec, to_device)


FORMATS = (
    DataFormat(
        PARALLEL_TEXT,
        check_parallel_text,
        open_parallel_text,
        in_memory=True,
        tasks=("translation",),
        default_for=("translation",),
        about="a parallel corpus (two aligned text files per split)",
    ),
)
