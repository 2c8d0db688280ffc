"""What a JAX worker's environment must hold before `import jax` beyond its threads (imports no framework).

XLA's GPU client grabs 75% of the GPU's memory when it starts unless XLA_PYTHON_CLIENT_PREALLOCATE is
false: the telemetry's memory column would then show the reservation, not what the job used, and would not
compare with TensorFlow's (which grows on demand in dlbench). A value the user set is left as it is.

devices=N (N > 1) on the CPU: XLA's CPU client shows one device unless XLA_FLAGS asks for more host
devices when it starts, so `--xla_force_host_platform_device_count=N` is appended to the XLA_FLAGS the
user set (kept as they are; a count already given there wins). It changes nothing on a GPU, whose devices
are the local GPUs.
"""

from __future__ import annotations

import os

PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"
GROWS = ("false", "False", "0")  # the values of PREALLOCATE jaxlib's xla_client reads as "grow the pool"
HOST_DEVICES = "--xla_force_host_platform_device_count"


def env(devices: int = 1) -> dict[str, str]:
    out = {} if PREALLOCATE in os.environ else {PREALLOCATE: "false"}
    return out | host_devices(devices, os.environ.get("XLA_FLAGS", ""))


def oom_hint() -> str:
    """Offered after an out-of-memory line while the pool grows: a grown pool keeps every region it took
    (XLA's GPU allocator without garbage collection), so one large block can find no room however little is
    in use (SSD300 at fp32, batch 128, on an 80-GB GPU: out of memory growing, trained when taken whole)."""
    if os.environ.get(PREALLOCATE, "") not in GROWS:
        return ""
    return f"or set {PREALLOCATE}=true (XLA's growing pool can leave no room for one large block)"


def host_devices(devices: int, flags: str) -> dict[str, str]:
    """XLA_FLAGS with N host devices for devices=N > 1 (the user's flags first); nothing for one device or
    when the user's flags already set a count."""
    if devices == 1 or HOST_DEVICES in flags:
        return {}
    return {"XLA_FLAGS": f"{flags} {HOST_DEVICES}={devices}".strip()}
