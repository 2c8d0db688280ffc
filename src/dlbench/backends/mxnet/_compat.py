"""The one place the MXNet backend imports MXNet.

MXNet 1.9.1 reads `numpy.bool` at import time, an alias numpy 1.24 removed, so the alias is put back
first (numpy 2 has `numpy.bool` again and is left alone). `dlbench.backends.base.BACKENDS` names this
module as the mxnet "package", so `load_backend` imports MXNet through here; a missing MXNet becomes
BackendUnavailable with the pip command, as for the other frameworks.
"""

from __future__ import annotations

import sys

from dlbench.errors import BackendUnavailable

try:
    import numpy

    # numpy 1.24-1.26 lack the alias (and warn when asked for it); MXNet 1.9.1 needs it
    if "bool" not in vars(numpy):
        numpy.bool = bool  # type: ignore[attr-defined]
    import mxnet as mx
except ModuleNotFoundError as exc:
    if exc.name not in ("mxnet", "numpy"):
        raise
    raise BackendUnavailable(
        f"framework=mxnet: {exc.name} is not installed in {sys.executable}; install it with "
        f"`{sys.executable} -m pip install mxnet==1.9.1 numpy==1.26.4` or point framework.python at an "
        "interpreter that has it"
    ) from None

__all__ = ["mx"]
