"""CPU threads for MXNet: OpenMP threads per op and the engine's CPU worker threads, both N.

MXNet 1.9 takes both from the environment when its library loads (OMP_NUM_THREADS, and
MXNET_CPU_WORKER_NTHREADS for the engine) and left alone uses one OpenMP thread on a 2-core machine
(docs: WORKLOADS "CPU threads are not equal by default"), so `env` must be in place before the import.
"""

from __future__ import annotations

import ctypes
import os


def env(n: int) -> dict[str, str]:
    """Environment for a worker that must use n threads (set before mxnet is imported)."""
    return {"OMP_NUM_THREADS": str(n), "MXNET_CPU_WORKER_NTHREADS": str(n)}


def apply(n: int) -> dict[str, int]:
    """MXNet has no call to change them after the import; return what is in effect: the OpenMP
    runtime's own count (read from the libgomp MXNet linked) and the engine's worker count."""
    from dlbench.backends.mxnet._compat import mx  # noqa: F401  (loads libmxnet and its libgomp)

    try:
        omp = int(ctypes.CDLL("libgomp.so.1").omp_get_max_threads())
    except OSError:  # an MXNet built against another OpenMP runtime
        omp = int(os.environ.get("OMP_NUM_THREADS", "0"))
    return {"intra_op": omp, "inter_op": int(os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1"))}
