"""CPU threads for torch: intra-op (its OpenMP pool) and inter-op, both set to N.

torch reads OMP_NUM_THREADS when it starts its OpenMP pool, and its inter-op pool can be sized only
before first use, so the environment carries N too (`env`) and `apply` runs before the model is built.
"""

from __future__ import annotations

import contextlib


def env(n: int) -> dict[str, str]:
    """Environment for a worker that must use n threads (set before torch is imported)."""
    return {"OMP_NUM_THREADS": str(n)}


def apply(n: int) -> dict[str, int]:
    """Use n threads per op and n inter-op threads; return what torch reports it uses."""
    import torch

    torch.set_num_threads(n)
    # settable once, before first use; if already set, keep it and report what it has
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(n)
    return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}
