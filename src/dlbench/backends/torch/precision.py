"""Turn a precision config (data) into PyTorch settings, and read back what is really in effect."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from dlbench.config import PrecisionConfig

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class TorchPrecision:
    """Autocast context, loss scaler and TF32 switches for one device."""

    def __init__(self, spec: PrecisionConfig, device: torch.device) -> None:
        self.spec = spec
        self.device_type = device.type
        name = spec.dtype if device.type == "cuda" else spec.cpu_dtype
        self.compute_dtype = _DTYPES[name]
        # fp32 means true FP32: torch enables TF32 for cuDNN convolutions by default.
        torch.backends.cuda.matmul.allow_tf32 = spec.allow_tf32
        torch.backends.cudnn.allow_tf32 = spec.allow_tf32
        # Without autocast, a reduced compute dtype means the whole model runs in it (pure bf16/fp16).
        self.param_dtype = torch.float32 if spec.autocast else self.compute_dtype
        self.scaler = None
        if spec.loss_scale == "dynamic" and self.compute_dtype == torch.float16:
            self.scaler = torch.amp.GradScaler(self.device_type)

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.spec.autocast and self.compute_dtype != torch.float32:
            return torch.autocast(self.device_type, dtype=self.compute_dtype)
        return contextlib.nullcontext()

    def flags(self) -> dict[str, Any]:
        return {
            "autocast": f"{self.device_type}/{str(self.compute_dtype).removeprefix('torch.')}"
            if self.spec.autocast
            else "off",
            "loss_scale": f"dynamic (scale={self.scaler.get_scale():g})" if self.scaler else "none",
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        }


class DtypeProbe:
    """Records the output dtype of the first conv and the last linear layer during a real step."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.seen: dict[str, str] = {}
        self._hooks = []
        convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        for key, module in (("conv", convs[:1]), ("matmul", linears[-1:])):
            for m in module:
                self._hooks.append(m.register_forward_hook(self._record(key)))

    def _record(self, key: str):
        def hook(_module, _inputs, output):
            self.seen.setdefault(key, str(output.dtype).removeprefix("torch."))

        return hook

    @property
    def active(self) -> bool:
        return bool(self._hooks)

    def remove(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
