"""Which interpreter runs a job's worker (docs/architecture.md, "JAX").

`framework.python` wins when set. Left null, a framework runs under the interpreter running dlbench, except
one that needs an environment of its own: JAX needs numpy >= 2 and MXNet 1.9.1 numpy < 2, so `make setup`
puts JAX in `.venv-jax`. JAX then runs here when this interpreter can import it (a GPU image with jax
beside torch), else under `.venv-jax/bin/python`, else the job stops with one line saying how to make it.
Imports no framework (find_spec only looks).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from dlbench.config import FrameworkConfig
from dlbench.core.names import PROJECT_ROOT
from dlbench.errors import ConfigError

# framework.name -> (its environment under the project root, the package that must import)
OWN_ENVIRONMENTS = {"jax": (".venv-jax", "jax")}


def worker_python(
    framework: FrameworkConfig, root: Path = PROJECT_ROOT, importable: bool | None = None
) -> str:
    """The interpreter for `framework`'s worker; ConfigError (one line, the fix) when there is none.
    `root` (the project) and `importable` (whether this interpreter imports the framework; None: look)
    are for the tests."""
    if framework.python:
        return framework.python
    own = OWN_ENVIRONMENTS.get(framework.name)
    if own is None:
        return sys.executable
    venv, package = own
    if importable is None:
        importable = importlib.util.find_spec(package) is not None
    if importable:
        return sys.executable
    python = root / venv / "bin" / "python"
    if python.exists():
        return str(python)
    raise ConfigError(
        f"framework={framework.name}: {sys.executable} cannot import {package} and {python} does not "
        f"exist; run `make setup` (it makes {venv}) or set framework.python to an interpreter with {package}"
    )
