"""What a JAX worker's environment must hold before `import jax` beyond its threads (imports no framework).

XLA's GPU client grabs 75% of the GPU's memory when it starts unless XLA_PYTHON_CLIENT_PREALLOCATE is
false: the telemetry's memory column would then show the reservation, not what the job used, and would not
compare with TensorFlow's (which grows on demand in dlbench). A value the user set is left as it is.
"""

from __future__ import annotations

import os

PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"


def env() -> dict[str, str]:
    return {} if PREALLOCATE in os.environ else {PREALLOCATE: "false"}
