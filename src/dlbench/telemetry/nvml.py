"""GPU readings through NVML (nvidia-ml-py). No framework is imported: the orchestrator samples
the GPU from outside the worker, so the training loop never pays for it."""

from __future__ import annotations

import contextlib
from typing import Any

GPU_SERIES = (
    "util",
    "mem_util",
    "mem_used_mib",
    "power_w",
    "sm_clock_mhz",
    "temp_c",
    "clock_events",
    "energy_mj",
)
# clock_events: NVML's clocks-event (throttle) reasons, a bit mask (telemetry/guards.py names the bits).
# energy_mj: the board's total-energy counter (millijoules since the driver loaded), on GPUs that have one.


def visible_devices(env_value: str | None) -> list[str] | None:
    """Parse CUDA_VISIBLE_DEVICES: None = all devices; else indices or UUIDs in CUDA's order."""
    if env_value is None:
        return None
    out = []
    for part in env_value.split(","):
        part = part.strip()
        if not part:
            continue
        if part.startswith("-"):  # CUDA stops at the first invalid entry
            break
        out.append(part)
    return out


class NvmlReader:
    """Reads the GPUs a job can use: the first `count` devices CUDA_VISIBLE_DEVICES exposes."""

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self._nvml = nvml
        self._handles = handles
        # optional readings, probed once: a failing call would cost the whole tick's GPU readings
        self._has_energy = [_supported(nvml.nvmlDeviceGetTotalEnergyConsumption, h) for h in handles]
        self._has_events = [_supported(nvml.nvmlDeviceGetCurrentClocksEventReasons, h) for h in handles]

    @classmethod
    def open(cls, visible: str | None, count: int = 1) -> tuple[NvmlReader | None, str]:
        """Return (reader, "") or (None, why) when there is no NVML or no GPU."""
        try:
            import pynvml as nvml

            nvml.nvmlInit()
        except Exception as exc:  # library missing, no driver, no GPU: all mean "host only"
            return None, f"no NVML ({type(exc).__name__}: {exc})"
        try:
            ids = visible_devices(visible)
            if ids is None:
                ids = [str(i) for i in range(nvml.nvmlDeviceGetCount())]
            handles = [_handle(nvml, i) for i in ids[:count]]
        except Exception as exc:
            return None, f"NVML cannot open the visible GPUs ({exc})"
        if not handles:
            return None, "NVML found no visible GPU"
        return cls(nvml, handles), ""

    def info(self) -> dict[str, str]:
        n = self._nvml
        out = {"driver": _text(n.nvmlSystemGetDriverVersion())}
        for i, h in enumerate(self._handles):
            out[f"gpu{i}_name"] = _text(n.nvmlDeviceGetName(h))
            mem = n.nvmlDeviceGetMemoryInfo(h)
            out[f"gpu{i}_mem_total_mib"] = str(mem.total // 2**20)
        return out

    def gpus(self) -> list[tuple[str, tuple[int, int]]]:
        """(name, CUDA compute capability) of each GPU the reader holds, in CUDA's order."""
        n = self._nvml
        return [
            (_text(n.nvmlDeviceGetName(h)), tuple(int(v) for v in n.nvmlDeviceGetCudaComputeCapability(h)))
            for h in self._handles
        ]

    def read(self) -> dict[str, float]:
        n = self._nvml
        out: dict[str, float] = {}
        for i, h in enumerate(self._handles):
            util = n.nvmlDeviceGetUtilizationRates(h)
            out[f"gpu{i}/util"] = float(util.gpu)
            out[f"gpu{i}/mem_util"] = float(util.memory)
            out[f"gpu{i}/mem_used_mib"] = n.nvmlDeviceGetMemoryInfo(h).used / 2**20
            out[f"gpu{i}/power_w"] = n.nvmlDeviceGetPowerUsage(h) / 1000.0
            out[f"gpu{i}/sm_clock_mhz"] = float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))
            out[f"gpu{i}/temp_c"] = float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))
            if self._has_events[i]:
                out[f"gpu{i}/clock_events"] = float(n.nvmlDeviceGetCurrentClocksEventReasons(h))
            if self._has_energy[i]:
                out[f"gpu{i}/energy_mj"] = float(n.nvmlDeviceGetTotalEnergyConsumption(h))
        return out

    def processes(self) -> dict[int, float]:
        """The compute processes on the reader's GPUs: pid -> GPU memory in MiB (0 when NVML hides it).
        NVML reports pids of the host's pid namespace: in a container they may not be ours to see."""
        out: dict[int, float] = {}
        for h in self._handles:
            for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(h):
                used = p.usedGpuMemory if isinstance(p.usedGpuMemory, int) else 0
                out[int(p.pid)] = out.get(int(p.pid), 0.0) + used / 2**20
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def visible_gpus(visible: str | None) -> list[tuple[str, tuple[int, int]]]:
    """(name, compute capability) of every GPU a process with CUDA_VISIBLE_DEVICES=`visible` can use;
    [] without NVML, a driver or a visible GPU."""
    reader, _ = NvmlReader.open(visible, count=1 << 10)
    if reader is None:
        return []
    try:
        return reader.gpus()
    except Exception:
        return []
    finally:
        reader.close()


def _handle(nvml: Any, ident: str) -> Any:
    if ident.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(ident))
    return nvml.nvmlDeviceGetHandleByUUID(ident)


def _supported(call: Any, handle: Any) -> bool:
    """Whether an optional NVML query works on this GPU (e.g. the energy counter needs Volta or later)."""
    try:
        call(handle)
        return True
    except Exception:
        return False


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
