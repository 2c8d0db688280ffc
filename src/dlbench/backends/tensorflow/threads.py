"""CPU threads for TensorFlow: intra-op and inter-op pools, both set to N.

TensorFlow fixes its pools when its runtime starts (the first op or device query), so `apply` runs
right after the import and before the model is built; the environment caps oneDNN's OpenMP too.
"""

from __future__ import annotations

import contextlib


def env(n: int) -> dict[str, str]:
    """Environment for a worker that must use n threads (set before tensorflow is imported)."""
    return {"OMP_NUM_THREADS": str(n), "TF_NUM_INTRAOP_THREADS": str(n), "TF_NUM_INTEROP_THREADS": str(n)}


def apply(n: int) -> dict[str, int]:
    """Use n threads per op and n inter-op threads; return what TensorFlow reports it uses."""
    import tensorflow as tf

    threading = tf.config.threading
    with contextlib.suppress(RuntimeError):  # the runtime already started: report what it has
        threading.set_intra_op_parallelism_threads(n)
        threading.set_inter_op_parallelism_threads(n)
    return {
        "intra_op": threading.get_intra_op_parallelism_threads(),
        "inter_op": threading.get_inter_op_parallelism_threads(),
    }
