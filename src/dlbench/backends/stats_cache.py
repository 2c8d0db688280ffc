"""A network's forward GFLOPs, counted once and kept on disk.

Every job reports the GFLOPs its framework counts for the network (`model.gflops`: the parity check and
the report use it). Counting builds the network once more and traces it after the timing, seconds a job for
TensorFlow (graph-mode SSD300 on an H100 machine: the job's end came 2.6-4.0 s after its last window with the
count kept, 5.0 s when counted), paid again by every precision and batch size of a sweep, although the count
depends on none of them. It depends on the framework (and its version), the model's keys and the code
that builds the network, so those make the key: any change to dlbench's own modules, or to the workload
package of the network, counts afresh.

$DLBENCH_CACHE names the folder (default: $XDG_CACHE_HOME/dlbench, else ~/.cache/dlbench); `off` turns
the cache off. A file that cannot be read or written is counted again, never an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from dlbench.core.spec import ModelConfig

CACHE_ENV = "DLBENCH_CACHE"
# keys that do not change the count: it is per sample, and the weights' values do not change the FLOPs
_NOT_IN_KEY = ("batch_size", "init_weights")


def cache_dir() -> Path | None:
    """Where counts are kept, or None when $DLBENCH_CACHE=off."""
    raw = os.environ.get(CACHE_ENV, "")
    if raw.lower() == "off":
        return None
    if raw:
        return Path(raw).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dlbench"


def _code_digest(packages: tuple[str, ...]) -> str:
    """sha256 over the source of every loaded module of `packages` (dlbench and the network's workload
    package): after the job they include everything that built and counted the network."""
    h = hashlib.sha256()
    for name in sorted(sys.modules):
        if not any(name == p or name.startswith(p + ".") for p in packages):
            continue
        path = getattr(sys.modules[name], "__file__", None)
        if path and path.endswith(".py") and os.path.isfile(path):
            h.update(name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return h.hexdigest()


def stats_key(framework: str, versions: dict[str, str], model: ModelConfig, package: str) -> str:
    """The cache key of one network's count in one framework (see the module's docstring)."""
    keys = {k: v for k, v in dataclasses.asdict(model).items() if k not in _NOT_IN_KEY}
    what = {
        "framework": framework,
        "versions": versions,
        "model": keys,
        "code": _code_digest(("dlbench", package)),
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


def cached_gflops(key: str, count: Callable[[], float]) -> float:
    """The count kept under `key`, or `count()` (then kept, written atomically: parallel jobs may race)."""
    folder = cache_dir()
    path = folder / "model_stats" / f"{key}.json" if folder else None
    if path is not None:
        try:
            return float(json.loads(path.read_text())["gflops"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    gflops = float(count())
    if path is not None:
        _keep(path, gflops)
    return gflops


def _keep(path: Path, gflops: float) -> None:
    """Write the count to `path` through a temporary file in its folder (no reader sees half a file)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as f:
            tmp = f.name
            json.dump({"gflops": gflops}, f)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
