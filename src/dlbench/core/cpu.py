"""What this CPU can compute, read without importing a framework: its instruction-set flags, and the cap that
oneDNN (inside torch, TensorFlow and MXNet) is told to honour through ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA.

The capability checks (dlbench.backends.capability) decide from these, before a job's run is made, whether
a cell can run here at all (MXNet's bfloat16 needs oneDNN's AVX-512 kernels) and whether reduced precision
is native or emulated. The cap matters as much as the flags: with ONEDNN_MAX_CPU_ISA=AVX2 an AVX-512 machine
computes like an AVX2-only one, which is how the tests reproduce a laptop's CPU on a server.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path

CAP_VARS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")  # oneDNN 2.x reads both; the first set one wins
AVX512_CORE = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq"})  # oneDNN's avx512_core
NATIVE_BF16 = frozenset({"avx512_bf16", "amx_bf16"})
NATIVE_FP16 = frozenset({"avx512_fp16", "amx_fp16"})
# oneDNN's ISA names, weakest first (its dnnl_cpu_isa_t); a cap allows what is at or below it.
ISA_ORDER = (
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
    "AVX512_CORE_BF16",
    "AVX512_CORE_FP16",
    "AVX512_CORE_AMX",
    "AVX512_CORE_AMX_FP16",
    "AVX10_1_512",
    "AVX10_1_512_AMX",
    "AVX10_1_512_AMX_FP16",
    "AVX10_2_512",
    "AVX10_2_512_AMX_2",
    "ALL",
)


def _cpuinfo(field: str) -> str | None:
    """The first value of `field` in /proc/cpuinfo (None where there is no such file, e.g. not Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == field:
            return value.strip()
    return None


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none, e.g. not Linux)."""
    return frozenset((_cpuinfo("flags") or "").split())


def cpu_model() -> str | None:
    """The CPU's model name ("AMD EPYC 9B14"), where /proc/cpuinfo gives one: platform.processor() says only
    "x86_64" on Linux."""
    return _cpuinfo("model name")


def _cap(env: Mapping[str, str] | None) -> tuple[str, str] | None:
    """(variable, value) of the oneDNN ISA cap in force, or None."""
    env = os.environ if env is None else env
    var = next((v for v in CAP_VARS if env.get(v)), None)
    return (var, env[var].strip()) if var else None


def isa_cap(env: Mapping[str, str] | None = None) -> str | None:
    """The oneDNN ISA cap in force (upper case), or None when none is set."""
    cap = _cap(env)
    return cap[1].upper() if cap else None


def cap_allows(isa: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether oneDNN may use `isa` under the cap; an unknown cap value is ignored, as oneDNN ignores it."""
    cap = isa_cap(env)
    if cap is None or cap not in ISA_ORDER:
        return True
    return ISA_ORDER.index(cap) >= ISA_ORDER.index(isa)


def cap_text(env: Mapping[str, str] | None = None) -> str:
    """', and oneDNN is capped by ONEDNN_MAX_CPU_ISA=AVX2' when a cap is set, for messages."""
    cap = _cap(env)
    return f", and oneDNN is capped by {cap[0]}={cap[1]}" if cap else ""


def onednn_avx512_core(env: Mapping[str, str] | None = None) -> str | None:
    """None when oneDNN can use its AVX-512 (avx512_core) kernels here, else why not."""
    missing = sorted(AVX512_CORE - cpu_flags())
    if missing:
        return f"this CPU has no AVX-512 ({', '.join(missing)} missing){cap_text(env)}"
    if not cap_allows("AVX512_CORE", env):
        var, value = _cap(env)
        return f"oneDNN is capped below AVX-512 by {var}={value}"
    return None


def native(dtype: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether this CPU computes `dtype` (bfloat16, float16) in hardware, within the oneDNN cap; float32
    always."""
    flags = {"bfloat16": (NATIVE_BF16, "AVX512_CORE_BF16"), "float16": (NATIVE_FP16, "AVX512_CORE_FP16")}
    if dtype not in flags:
        return True
    wanted, isa = flags[dtype]
    return bool(wanted & cpu_flags()) and cap_allows(isa, env)
