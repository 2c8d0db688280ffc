"""Parallel text for translation: a corpus in the two-file layout, and the public-domain Bible pairs.

The two-file layout (what `dataset.path` points at; WMT16 en-de unpacked the usual way fits it):
    DIR/<split>.<src>   one sentence per line
    DIR/<split>.<tgt>   the translation of the same line
for split in train / valid (and test). Lines are plain, detokenised text; the BPE model
(workloads/translation/bpe.py) tokenises them.

The built-in corpus needs no download: Debian's `sword-text-sparv` (Spanish Reina-Valera 1909) and
`sword-text-web` (World English Bible) modules, both public domain, read with pysword and aligned verse
by verse. Books whose chapter/verse structure differs between the two versifications (3 John,
Revelation) are skipped, as are the WEB's deuterocanonical books and empty verses: 30,659 pairs.
Reading both modules took 93 s to 350 s on this (shared, loaded) 2-core machine, so the pairs are cached
as a TSV (reference, Spanish, English) and the two-file layout is written from it.
"""

from __future__ import annotations

import csv
import html
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from dlbench.errors import ConfigError

SWORD_DIR = Path("/usr/share/sword")
BIBLE_MODULES = {"es": "spaRV1909eb", "en": "engWEB2015eb"}
APT_INSTALL = "apt-get install -y sword-text-sparv sword-text-web"
PIP_INSTALL = "pip install pysword==0.2.8"
SPLITS = ("train", "valid", "test")


class CorpusMissing(ConfigError):
    """A corpus that is not there; the message is one line with the command that installs it."""


def corpus_files(path: str | Path, src: str, tgt: str, split: str = "train") -> tuple[Path, Path]:
    """The two files of `split` in `path`, or CorpusMissing naming the files the layout needs."""
    root = Path(path).expanduser()
    files = (root / f"{split}.{src}", root / f"{split}.{tgt}")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise CorpusMissing(
            f"dataset.path={root}: missing {', '.join(missing)}; a parallel corpus is two aligned files "
            f"{split}.{src} and {split}.{tgt}, one sentence per line "
            "(for the built-in Bible pairs run `python scripts/datasets/prepare_translation.py`)"
        )
    return files


def _misaligned(path: str | Path, src_file: Path, n_src: int, tgt_file: Path, n_tgt: int) -> ConfigError:
    return ConfigError(
        f"dataset.path={path}: {src_file.name} has {n_src} lines but {tgt_file.name} has {n_tgt}; the two "
        "files must be aligned line by line"
    )


def _count_lines(file: Path) -> int:
    """Lines as str.splitlines counts them for these files (a last line without a newline counts)."""
    with open(file, encoding="utf-8", newline="") as f:
        return sum(1 for _ in f)


def check_aligned(path: str | Path, src: str, tgt: str, split: str = "train") -> tuple[Path, Path]:
    """The split's two files, after a cheap line count (no decoding into pairs): a corpus whose files are
    not aligned is refused before anything expensive (BPE training) reads it."""
    src_file, tgt_file = corpus_files(path, src, tgt, split)
    n_src, n_tgt = _count_lines(src_file), _count_lines(tgt_file)
    if n_src != n_tgt:
        raise _misaligned(path, src_file, n_src, tgt_file, n_tgt)
    return src_file, tgt_file


def read_pairs(path: str | Path, src: str, tgt: str, split: str = "train", limit: int | None = None):
    """[(source, target)] of a two-file corpus; unequal line counts are a one-line ConfigError."""
    src_file, tgt_file = corpus_files(path, src, tgt, split)
    sources = src_file.read_text(encoding="utf-8").splitlines()
    targets = tgt_file.read_text(encoding="utf-8").splitlines()
    if len(sources) != len(targets):
        raise _misaligned(path, src_file, len(sources), tgt_file, len(targets))
    pairs = list(zip(sources, targets, strict=True))
    return pairs[:limit] if limit is not None else pairs


def write_pairs(path: str | Path, pairs: Iterable[tuple[str, str]], src: str, tgt: str, split: str) -> int:
    """Write `pairs` as `split`.src / `split`.tgt under path; returns the count."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    pairs = list(pairs)
    for side, lang in enumerate((src, tgt)):
        text = "".join(pair[side].replace("\n", " ") + "\n" for pair in pairs)
        (root / f"{split}.{lang}").write_text(text, encoding="utf-8")
    return len(pairs)


# --- the Bible pairs -----------------------------------------------------------------------------

_NOTE = re.compile(r"<note\b.*?</note>", re.S)
_TAG = re.compile(r"<[^>]+>")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")


def clean_osis(raw: str) -> str:
    """Verse text without footnotes or markup. A footnote becomes a space (pysword's own `clean` joins
    the words on either side: "God<note>...</note>created" -> "Godcreated")."""
    text = _TAG.sub("", _NOTE.sub(" ", raw))
    text = " ".join(html.unescape(text).split())
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text)


def _bibles(sword_dir: Path) -> dict:
    confs = {f.stem.lower() for f in (sword_dir / "mods.d").glob("*.conf")}
    if not all(m.lower() in confs for m in BIBLE_MODULES.values()):
        raise CorpusMissing(
            f"the Bible corpus needs the Debian sword modules in {sword_dir}: install them with `{APT_INSTALL}`"
        )
    try:
        from pysword.modules import SwordModules
    except ModuleNotFoundError:
        raise CorpusMissing(
            f"reading the Bible corpus needs pysword: install it with `{PIP_INSTALL}`"
        ) from None
    modules = SwordModules(str(sword_dir))
    modules.parse_modules()
    return {lang: modules.get_bible_from_module(name) for lang, name in BIBLE_MODULES.items()}


def _books(bible) -> dict:
    return {book.osis_name: book for books in bible.get_structure().get_books().values() for book in books}


def extract_bible(
    sword_dir: Path = SWORD_DIR, books: Sequence[str] | None = None
) -> list[tuple[str, str, str]]:
    """[(reference, Spanish, English)] for every verse both modules have with the same structure
    (only `books`, OSIS names such as "Ruth", when given)."""
    bibles = _bibles(sword_dir)
    es_books, en_books = _books(bibles["es"]), _books(bibles["en"])
    rows = []
    for name, es_book in es_books.items():
        en_book = en_books.get(name)
        if books is not None and name not in books:
            continue
        if en_book is None or en_book.chapter_lengths != es_book.chapter_lengths:
            continue
        verses = zip(
            bibles["es"].get_iter(books=[name], clean=False),
            bibles["en"].get_iter(books=[name], clean=False),
            strict=True,
        )
        refs = ((c + 1, v + 1) for c, n in enumerate(es_book.chapter_lengths) for v in range(n))
        for (chapter, verse), (es_raw, en_raw) in zip(refs, verses, strict=True):
            es, en = clean_osis(es_raw), clean_osis(en_raw)
            if es and en:
                rows.append((f"{name} {chapter}:{verse}", es, en))
    return rows


def bible_tsv(cache_dir: str | Path, sword_dir: Path = SWORD_DIR) -> Path:
    """The cached TSV of the Bible pairs (extracted on first use: minutes)."""
    path = Path(cache_dir) / "bible-es-en.tsv"
    if not path.is_file():
        rows = extract_bible(sword_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8", newline="") as f:
            csv.writer(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL, lineterminator="\n").writerows(rows)
        tmp.replace(path)
    return path


def read_tsv(path: str | Path) -> list[tuple[str, str, str]]:
    with Path(path).open(encoding="utf-8", newline="") as f:
        return [tuple(row) for row in csv.reader(f, delimiter="\t")]


def split_rows(rows: list, valid: int, test: int) -> dict[str, list]:
    """Held-out verses spread over the whole book order (every k-th verse), not one book's tail."""
    held = valid + test
    if held >= len(rows):
        raise ConfigError(f"{len(rows)} pairs cannot hold out {valid} valid + {test} test pairs")
    stride = len(rows) // held if held else 0
    held_idx = set(range(0, stride * held, stride)) if held else set()
    held_rows = [rows[i] for i in sorted(held_idx)]
    return {
        "train": [r for i, r in enumerate(rows) if i not in held_idx],
        "valid": held_rows[:valid],
        "test": held_rows[valid:],
    }


def rows_to_corpus(rows: list, out_dir: str | Path, valid: int = 500, test: int = 500) -> dict[str, int]:
    """TSV rows (ref, es, en) -> the two-file layout (train/valid/test .es/.en); counts per split."""
    return {
        split: write_pairs(out_dir, [(es, en) for _, es, en in part], "es", "en", split)
        for split, part in split_rows(rows, valid, test).items()
    }
