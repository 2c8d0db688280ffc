"""CPU threads for JAX: XLA's CPU client runs every op in one pool (its `XLAEigen` threads), sized from the
process's CPU affinity when the client starts (on the first device query, not at `import jax`).

XLA has no flag for the pool's size (`intra_op_parallelism_threads` in XLA_FLAGS is refused), so `apply`
narrows the worker's affinity to n of its CPUs before the client starts, and reads the pool back by
counting its threads. XLA runs independent ops in that same pool: intra-op and inter-op are one count.
"""

from __future__ import annotations

import os


def env(n: int) -> dict[str, str]:
    """Environment for a worker that must use n threads: oneDNN's OpenMP inside XLA's CPU kernels."""
    return {"OMP_NUM_THREADS": str(n)}


def pool_threads() -> int:
    """XLA's CPU pool as the kernel lists it: this process's threads named after it."""
    names = (_comm(t) for t in os.listdir("/proc/self/task"))
    return sum(1 for name in names if "XLAEigen" in name)


def _comm(tid: str) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read()
    except OSError:  # the thread ended meanwhile
        return ""


def apply(n: int) -> dict[str, int]:
    """Use n CPU threads; return the pool XLA really started (before any JAX work in this process)."""
    cpus = sorted(os.sched_getaffinity(0))
    if n < len(cpus):
        os.sched_setaffinity(0, cpus[:n])
    import jax

    jax.devices("cpu")  # starts the CPU client, and its pool, under that affinity
    counted = pool_threads() or n  # no /proc (not Linux): what was asked
    return {"intra_op": counted, "inter_op": counted}
