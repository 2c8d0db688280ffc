"""Translate the precision plan (dlbench.core.precision) into MXNet settings, and read back what is
really in effect from real layer outputs.

How MXNet 1.9.1 does reduced precision:
- autocast = `mxnet.contrib.amp`: `amp.init(target_dtype)` rewraps the operator functions of
  `mx.nd` / `mx.sym` so that Convolution and FullyConnected get their inputs cast (amp_cast) to the
  target dtype while numerically sensitive ops are cast back to float32. Weights stay float32. It
  works for imperative and hybridized Gluon blocks, for training and inference, but only for blocks
  built after `amp.init`, so it must run before the network is made (and once per process).
- float16 runs on CUDA only (on CPU: "FP16 gemm on cpu not implemented!"). Dynamic loss scaling =
  `amp.init_trainer` + `amp.scale_loss`; its overflow check in Trainer.step reads a flag back to
  the host: one sync per step (MXNet's design).
- bfloat16 runs on CPU only, and only through oneDNN's (2.4.4) bf16 kernels, which need AVX-512
  (avx512_core; native with avx512_bf16). MXNet has no other bf16 Convolution or FullyConnected:
  without oneDNN, or on an AVX2-only CPU, they fail ("could not create a primitive descriptor
  iterator" / "Unknown type enum 12"). `check_dtype_runs` probes this once up front and turns it
  into a one-line BackendUnavailable instead of a crash at the first step. AMX is not used: oneDNN
  2.4 leaves it off, and DNNL_MAX_CPU_ISA=AVX512_CORE_AMX dies with SIGILL (Sapphire Rapids host).
- autocast false with a reduced dtype: the whole network is cast (`block.cast`), inputs too, with
  BatchNorm parameters kept float32 (MXNet's BatchNorm requires it). float16 trains with SGD's
  multi_precision (float32 master weights); a bfloat16-cast network can only run inference: SGD has
  no bfloat16 kernel, and neither has Dropout (so inference networks are built without it).
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

import numpy as np

from dlbench.backends.mxnet._compat import mx
from dlbench.backends.skeleton import LayerRecord
from dlbench.core.precision import PrecisionPlan
from dlbench.errors import BackendUnavailable

_amp: Any = None  # mxnet.contrib.amp.amp, imported on first use (it rewraps operators when initialized)


def amp_module() -> Any:
    global _amp
    if _amp is None:
        from mxnet.contrib.amp import amp

        _amp = amp
    return _amp


def np_dtype(name: str) -> Any:
    """The numpy dtype MXNet uses for `name` (bfloat16 is AMP's structured uint16 dtype)."""
    return amp_module().bfloat16 if name == "bfloat16" else np.dtype(name)


def dtype_name(dtype: Any) -> str:
    """'float32' / 'float16' / 'bfloat16' for an NDArray dtype (bfloat16 prints as a record type)."""
    dt = np.dtype(dtype)
    return "bfloat16" if dt.names == ("bfloat16",) else dt.name


def check_dtype_runs(name: str, ctx: Any, job_desc: str) -> None:
    """Run one tiny conv in `name` on `ctx`; raise BackendUnavailable (one line) if MXNet can't."""
    if name == "float32":
        return
    x = mx.nd.ones((1, 8, 4, 4), ctx=ctx)
    w = mx.nd.ones((8, 8, 3, 3), ctx=ctx)
    try:
        dt = np_dtype(name)
        y = mx.nd.Convolution(
            mx.nd.amp_cast(x, dtype=dt),
            mx.nd.amp_cast(w, dtype=dt),
            kernel=(3, 3),
            num_filter=8,
            no_bias=True,
        )
        y.wait_to_read()
    except mx.base.MXNetError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        cause = lines[-1] if lines else type(exc).__name__  # MXNet puts a traceback before the error
        hint = (
            "MXNet 1.9.1 computes bfloat16 only with oneDNN kernels, which need an AVX-512 CPU (avx512_core)"
            if name == "bfloat16" and ctx.device_type == "cpu"
            else f"MXNet 1.9.1 has no {name} convolution on {ctx}"
        )
        raise BackendUnavailable(f"{job_desc}: {hint}; a {name} test convolution failed ({cause})") from None


def cast_network(net: Any, name: str) -> None:
    """Cast the whole network to `name`, BatchNorm parameters excepted: MXNet's BatchNorm wants
    float32 gamma/beta/statistics beside float16/bfloat16 data. Gluon keeps them float32 by itself
    for float16 only; for bfloat16 they are cast back here."""
    net.cast(np_dtype(name))
    stack = [net]
    while stack:
        block = stack.pop()
        if isinstance(block, mx.gluon.nn.BatchNorm):
            block.cast(np.float32)
        stack.extend(block._children.values())


class MXPrecision:
    """AMP initialization, whole-network cast and loss scaling for one context."""

    def __init__(self, plan: PrecisionPlan, ctx: Any, train: bool, job_desc: str) -> None:
        self.plan = plan
        self.device_type = ctx.device_type  # "cpu" or "gpu"
        self.compute_name = plan.compute_dtype
        self.amp = plan.autocast
        # Without autocast, a reduced compute dtype means the whole model runs in it (pure fp16/bf16).
        self.param_name = plan.param_dtype
        # MXNet's dynamic loss scaler is AMP's; a cast float16 network trains with multi_precision.
        self.loss_scaling = self.amp and plan.loss_scaling
        self._trainer: Any = None
        if self.device_type == "gpu":
            # fp32 means true FP32: cuDNN 8 uses TF32 on Ampere+ unless NVIDIA_TF32_OVERRIDE=0, which
            # the libraries read when they create their handles, i.e. before the first GPU kernel.
            if plan.tf32:
                os.environ.pop("NVIDIA_TF32_OVERRIDE", None)
            else:
                os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
        if train and self.param_name == "bfloat16":
            raise BackendUnavailable(
                f"{job_desc}: MXNet 1.9.1 cannot train a network cast to bfloat16 (its SGD update has no "
                "bfloat16 kernel: 'Unknown type enum 12'); use autocast: true (mxnet.contrib.amp) to train "
                "with bfloat16 compute"
            )
        check_dtype_runs(self.compute_name, ctx, job_desc)
        if self.amp:
            amp_module().init(target_dtype=self.compute_name)  # before the network is built

    @property
    def param_dtype(self) -> Any:
        return np_dtype(self.param_name)

    def attach(self, trainer: Any) -> None:
        """Give the trainer AMP's dynamic loss scaler (float16 autocast with loss_scale=dynamic)."""
        self._trainer = trainer
        if self.loss_scaling:
            amp_module().init_trainer(trainer)

    def backward(self, loss: Any) -> None:
        """loss.backward(), through the loss scaler when one is in use."""
        if self.loss_scaling:
            with amp_module().scale_loss(loss, self._trainer) as scaled:
                mx.autograd.backward(scaled)
        else:
            loss.backward()

    def _tf32(self) -> str:
        if self.device_type != "gpu":
            return "n/a (cpu)"
        return (
            "off (NVIDIA_TF32_OVERRIDE=0)"
            if os.environ.get("NVIDIA_TF32_OVERRIDE") == "0"
            else "library default"
        )

    def flags(self) -> dict[str, Any]:
        scaler = getattr(self._trainer, "_amp_loss_scaler", None) if self.loss_scaling else None
        return {
            "autocast": f"{self.device_type}/{self.compute_name} (mxnet.contrib.amp)" if self.amp else "off",
            "loss_scale": f"dynamic (scale={scaler.loss_scale:g})" if scaler is not None else "none",
            "tf32": self._tf32(),
        }


NORM_OPS = {"BatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm", "_contrib_SyncBatchNorm"}
LOOKUP_OPS = {"Embedding", "_contrib_SparseEmbedding"}
CAST_OPS = {"amp_cast", "amp_multicast", "Cast"}


def weighted_ops(sym: Any, param_names: set[str]) -> list[tuple[str, str]]:
    """(node name, op) of every op that takes a parameter (through AMP's casts), normalization
    excluded, in the graph's topological order: the order the hybridized network runs them."""
    nodes = json.loads(sym.tojson())["nodes"]

    def source(entry: list[int]) -> dict:
        node = nodes[entry[0]]
        while node["op"] in CAST_OPS:  # amp_multicast's output i is its input i
            node_inputs = node["inputs"]
            entry = node_inputs[entry[1]] if node["op"] == "amp_multicast" else node_inputs[0]
            node = nodes[entry[0]]
        return node

    out = []
    for node in nodes:
        if node["op"] in ("null", *NORM_OPS, *CAST_OPS):
            continue
        if any(source(e)["op"] == "null" and source(e)["name"] in param_names for e in node["inputs"]):
            out.append((node["name"], node["op"]))
    return out


class LayerProbe:
    """Runs the first and last weight-carrying ops of the network's own graph (the symbol hybridize
    compiles, with AMP's casts) on a real batch, sharing the network's parameters, and records the dtype
    of their real outputs. Works hybridized or not: both run that graph's ops."""

    def __init__(self, net: Any, input_names: list[str]) -> None:
        self.net = net
        self.input_names = input_names
        self.record = LayerRecord()
        self.amp_cast_ops = 0

    def observe(self, inputs: tuple, train: bool) -> None:
        variables = [mx.sym.var(n) for n in self.input_names]
        sym = self.net(*variables)
        sym = mx.sym.Group(list(sym)) if isinstance(sym, (list, tuple)) else sym  # every output's graph
        internals = sym.get_internals()
        self.amp_cast_ops = sum(
            1 for n in internals.list_outputs() if "amp_cast" in n or "amp_multicast" in n
        )
        params = self.net.collect_params()
        ops = weighted_ops(sym, set(params.keys()))
        if not ops:
            return
        first_compute = next((o for o in ops if o[1] not in LOOKUP_OPS), None)
        picks = list(dict.fromkeys(o for o in (ops[0], first_compute, ops[-1]) if o is not None))
        with warnings.catch_warnings():  # "cannot decide type" of the inputs: the real batch decides
            warnings.simplefilter("ignore", UserWarning)
            block = mx.gluon.SymbolBlock(
                mx.sym.Group([internals[f"{name}_output"] for name, _ in picks]), variables, params=params
            )
        with mx.autograd.pause(train_mode=train):
            outs = block(*inputs)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        by_name = {name: (op, dtype_name(o.dtype)) for (name, op), o in zip(picks, outs, strict=True)}
        for name, _ in (ops[0], first_compute or ops[0], ops[-1]):
            op, dtype = by_name[name]
            self.record.see(name, op, dtype, op in LOOKUP_OPS)
