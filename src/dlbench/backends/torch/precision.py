"""Translate the precision plan (dlbench.core.precision) into PyTorch settings, and read back what is
really in effect from real layer outputs."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from dlbench.backends.skeleton import LayerRecord
from dlbench.core.precision import PrecisionPlan

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Weight-carrying layers that are not the compute: frameworks keep normalization in float32 by design.
NORMS = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)
LOOKUPS = (torch.nn.Embedding, torch.nn.EmbeddingBag)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class TorchPrecision:
    """Autocast context, loss scaler and TF32 switches for one device."""

    def __init__(self, plan: PrecisionPlan, device: torch.device) -> None:
        self.plan = plan
        self.device_type = device.type
        self.compute_dtype = _DTYPES[plan.compute_dtype]
        self.param_dtype = _DTYPES[plan.param_dtype]
        self.input_dtype = _DTYPES[plan.input_dtype]
        # fp32 means true FP32: torch enables TF32 for cuDNN convolutions by default.
        torch.backends.cuda.matmul.allow_tf32 = plan.tf32
        torch.backends.cudnn.allow_tf32 = plan.tf32
        self.scaler = torch.amp.GradScaler(self.device_type) if plan.loss_scaling else None

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.plan.autocast:
            return torch.autocast(self.device_type, dtype=self.compute_dtype)
        return contextlib.nullcontext()

    def flags(self) -> dict[str, Any]:
        return {
            "autocast": f"{self.device_type}/{self.plan.compute_dtype}" if self.plan.autocast else "off",
            "loss_scale": f"dynamic (scale={self.scaler.get_scale():g})" if self.scaler else "none",
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        }


def _first_tensor(output: Any) -> torch.Tensor | None:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)):
        return next((t for t in output if isinstance(t, torch.Tensor)), None)
    return None


class LayerProbe:
    """Forward hooks on every weight-carrying layer (conv, linear, embedding, attention, ...; not
    normalization) that record, during one real step, the output dtype of the first and last of them
    in execution order. `remove()` takes the hooks out: none stays in the timed loop."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.record = LayerRecord()
        self._hooks = []
        for name, module in model.named_modules():
            if isinstance(module, NORMS) or next(module.parameters(recurse=False), None) is None:
                continue
            self._hooks.append(module.register_forward_hook(self._hook(name or type(module).__name__)))

    def _hook(self, name: str):
        def hook(module, _inputs, output):
            t = _first_tensor(output)
            if t is not None:
                self.record.see(name, type(module).__name__, dtype_name(t.dtype), isinstance(module, LOOKUPS))

        return hook

    @property
    def active(self) -> bool:
        return bool(self._hooks)

    def remove(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
