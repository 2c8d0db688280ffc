"""Corpus BLEU with sacrebleu on detokenised text (the WMT convention: sacrebleu's own 13a tokenisation,
one reference per sentence), so the score is comparable with published sacreBLEU numbers and is the
same for every framework: the backends only produce ids, workloads/translation/bpe.py turns them into text."""

from __future__ import annotations

from collections.abc import Sequence

PIP_INSTALL = "pip install sacrebleu==2.6.0"


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """BLEU (0-100) of detokenised hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise ValueError(f"BLEU needs one reference per hypothesis: {len(hypotheses)} vs {len(references)}")
    try:
        import sacrebleu
    except ModuleNotFoundError:
        raise RuntimeError(f"BLEU needs sacrebleu: install it with `{PIP_INSTALL}`") from None
    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score)
