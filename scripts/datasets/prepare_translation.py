#!/usr/bin/env python
"""Prepare the built-in Spanish->English translation corpus and its BPE model (no download).

    python scripts/datasets/prepare_translation.py [--out DIR] [--vocab 8000] [--valid 500] [--test 500]

Reads Debian's sword-text-sparv (RV1909) and sword-text-web (WEB) modules with pysword, caches the
aligned verses as DIR/bible-es-en.tsv (minutes, once), writes the two-file layout the translation data
path reads (DIR/{train,valid,test}.{es,en}) and trains a shared sentencepiece BPE (DIR/bpe<vocab>-<digest>.model, keyed by the training files' bytes).
Default DIR: $DLBENCH_TRANSLATION or ~/.cache/dlbench/bible-es-en. A missing module or package is one
line with the command that installs it (exit 2).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from dlbench.workloads.translation.bpe import train_bpe  # noqa: E402
from dlbench.workloads.translation.parallel_text import (  # noqa: E402
    SWORD_DIR,
    CorpusMissing,
    bible_tsv,
    read_tsv,
    rows_to_corpus,
)

DEFAULT_DIR = Path(os.environ.get("DLBENCH_TRANSLATION", "~/.cache/dlbench/bible-es-en")).expanduser()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--vocab", type=int, default=8000, help="BPE vocabulary (shared by both languages)")
    ap.add_argument("--valid", type=int, default=500)
    ap.add_argument("--test", type=int, default=500)
    ap.add_argument(
        "--sword-dir", type=Path, default=SWORD_DIR, help="where the Debian modules are installed"
    )
    args = ap.parse_args(argv)
    start = time.perf_counter()
    try:
        tsv = bible_tsv(args.out, args.sword_dir)
        counts = rows_to_corpus(read_tsv(tsv), args.out, args.valid, args.test)
        model = train_bpe(args.out, "es", "en", args.vocab, args.out)
    except CorpusMissing as exc:
        print(f"prepare_translation: {exc}", file=sys.stderr)
        return 2
    pairs = ", ".join(f"{split} {n}" for split, n in counts.items())
    print(
        f"prepare_translation: {args.out}: {pairs} pairs; BPE {model.name}; {time.perf_counter() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
