"""A shared source/target BPE vocabulary with sentencepiece (a real tokenizer, trained on the corpus).

One model for both languages, as the Transformer's tied embedding needs. Special ids are fixed to the
ones the models use (dlbench.workloads.translation.transformer): PAD 0, BOS 1, EOS 2, UNK 3. sentencepiece works on raw
text and its pieces carry the spaces, so `decode` gives detokenised text ready for sacrebleu.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from dlbench.workloads.translation.parallel_text import check_aligned
from dlbench.workloads.translation.transformer import BOS, EOS, PAD, UNK

PIP_INSTALL = "pip install sentencepiece==0.2.3"


def _spm():
    try:
        import sentencepiece
    except ModuleNotFoundError:
        from dlbench.workloads.translation.parallel_text import CorpusMissing

        raise CorpusMissing(
            f"the BPE tokenizer needs sentencepiece: install it with `{PIP_INSTALL}`"
        ) from None
    return sentencepiece


def corpus_digest(files: Sequence[Path]) -> str:
    """A digest of the files' bytes (and their order): what a cached BPE model was built from."""
    h = hashlib.sha256()
    for file in files:
        h.update(file.name.encode() + b"\0")
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def train_bpe(
    corpus: str | Path, src: str, tgt: str, vocab_size: int, model_dir: str | Path, threads: int = 2
) -> Path:
    """Train BPE on train.<src> + train.<tgt>; returns the .model path (model_dir/bpe<vocab>-<digest>.model).
    Reuses a model built from the same bytes (training takes tens of seconds on the Bible pairs); an
    edited or different corpus has another digest, so it gets its own model, never a stale one. The two
    files' line counts are compared first: misaligned files are refused before BPE reads them."""
    files = check_aligned(corpus, src, tgt, "train")
    model = Path(model_dir) / f"bpe{vocab_size}-{corpus_digest(files)}.model"
    if model.is_file():
        return model
    model.parent.mkdir(parents=True, exist_ok=True)
    inputs = [str(f) for f in files]
    _spm().SentencePieceTrainer.train(
        input=inputs,
        model_prefix=str(model.with_suffix("")),
        model_type="bpe",
        vocab_size=vocab_size,
        character_coverage=1.0,
        pad_id=PAD,
        bos_id=BOS,
        eos_id=EOS,
        unk_id=UNK,
        num_threads=threads,
        minloglevel=2,
    )
    return model


class BPE:
    """Encode sentences to ids (without BOS/EOS: token_batches adds them) and decode ids to text."""

    def __init__(self, model: str | Path) -> None:
        self.sp = _spm().SentencePieceProcessor(model_file=str(model))

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        return self.sp.encode(list(sentences), out_type=int)

    def decode(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """Text of each id row, up to its first EOS, without PAD/BOS."""
        rows = []
        for row in ids:
            row = [int(i) for i in row]
            row = row[: row.index(EOS)] if EOS in row else row
            rows.append([i for i in row if i not in (PAD, BOS)])
        return self.sp.decode(rows)
