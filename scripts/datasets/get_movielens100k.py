#!/usr/bin/env python
"""Put the real MovieLens-100K ratings (100,000 rows) where `dataset=movielens` reads them, from PyPI.

    python scripts/datasets/get_movielens100k.py [--dest data/movielens/ml-100k] [--wheel recbole-1.2.1-...whl]

Why a recbole wheel: it is the one copy of MovieLens-100K that installs through a package registry
(`recbole/dataset_example/ml-100k/ml-100k.inter`, RecBole's TSV with a typed header), so no download
outside PyPI is needed. The wheel is fetched with `pip download --no-deps` into a temporary folder and
only that member is extracted; recbole itself is never installed (its pins conflict with ours).

The MovieLens licence forbids redistribution: the file goes to a git-ignored folder (data/) and must
never be committed. Idempotent: a complete file already in place is left alone. On failure: one line
on stderr naming the problem and exit status 1.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

RECBOLE = "recbole==1.2.1"
MEMBER = "recbole/dataset_example/ml-100k/ml-100k.inter"
HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float"
ROWS = 100_000
DEFAULT_DEST = Path(__file__).resolve().parents[2] / "data" / "movielens" / "ml-100k"


class SetupError(RuntimeError):
    """A step failed; the message is the one line the user sees."""


def is_complete(path: Path) -> bool:
    """The file has RecBole's header and all 100,000 ratings (a partial copy is redone)."""
    if not path.is_file():
        return False
    with path.open(encoding="utf-8") as f:
        if f.readline().rstrip("\r\n") != HEADER:
            return False
        return sum(1 for line in f if line.strip()) == ROWS


def download_wheel(folder: Path) -> Path:
    """`pip download --no-deps recbole==1.2.1` into `folder`; the wheel's path."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        RECBOLE,
        "-d",
        str(folder),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(folder.glob("recbole-*.whl"))
    if proc.returncode or not wheels:
        lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        reason = lines[-1].strip() if lines else f"exit status {proc.returncode}"
        raise SetupError(
            f"`pip download --no-deps {RECBOLE}` failed ({reason}); check access to PyPI, or download the "
            "wheel elsewhere and pass it with --wheel"
        )
    return wheels[0]


def extract(wheel: Path, dest: Path) -> Path:
    """Copy the ml-100k.inter member of `wheel` to dest/ml-100k.inter (via a temporary name, so an
    interrupted copy never looks complete)."""
    target = dest / Path(MEMBER).name
    try:
        with zipfile.ZipFile(wheel) as zf:
            data = zf.read(MEMBER)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise SetupError(f"{wheel}: cannot read {MEMBER} from it ({exc})") from None
    dest.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".inter.partial")
    partial.write_bytes(data)
    if not is_complete(partial):
        partial.unlink()
        raise SetupError(f"{wheel}: {MEMBER} is not the expected {ROWS:,} ratings with header {HEADER!r}")
    partial.replace(target)
    return target


def prepare(dest: Path, wheel: Path | None = None) -> tuple[Path, bool]:
    """(path of ml-100k.inter, whether it was already there)."""
    target = dest / Path(MEMBER).name
    if is_complete(target):
        return target, True
    if wheel is not None:
        return extract(wheel, dest), False
    with tempfile.TemporaryDirectory(prefix="recbole-wheel-") as tmp:
        return extract(download_wheel(Path(tmp)), dest), False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="folder for ml-100k.inter")
    parser.add_argument("--wheel", type=Path, help="a recbole 1.2.1 wheel already downloaded (skips pip)")
    args = parser.parse_args(argv)
    try:
        path, present = prepare(args.dest.expanduser(), args.wheel)
    except (SetupError, OSError) as exc:
        print(f"get_movielens100k: {exc}", file=sys.stderr)
        return 1
    state = "already in place" if present else f"extracted from the {RECBOLE} wheel"
    print(f"MovieLens-100K: {ROWS:,} ratings {state}: {path} (licence: do not redistribute or commit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
