"""The JAX Bench: the task's Flax network, loss, Optax optimizer, input and precision on one device, or
on a mesh of N local devices for devices=N (backends/jax/mesh.py: the batch sharded, the state replicated).

The train step is one pure function of (variables, optimizer state, loss scale, PRNG key) and the batch,
`jax.jit`-compiled (framework.jit) with that state's buffers donated to its outputs (framework.donate), so
XLA updates the weights in place. A jitted call returns once the work is dispatched: step() does not wait;
sync() blocks until the step's outputs (the new state, or the inference outputs) are ready, which the
timing calls at window edges only.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dlbench.backends.jax.family import JaxFamily, Network, channels_last, example_inputs
from dlbench.backends.jax.mesh import DataMesh, mesh_devices
from dlbench.backends.jax.optimizers import make_optimizer
from dlbench.backends.jax.precision import JaxPrecision, LayerProbe, dtype_name
from dlbench.backends.skeleton import SpecBench
from dlbench.config import JobConfig
from dlbench.core.bench import Batch
from dlbench.core.precision import plan_precision
from dlbench.data.registry import SYNTHETIC, data_format
from dlbench.data.synthetic import HostBatch
from dlbench.errors import BackendUnavailable, ConfigError


def pick_device(requested: str) -> jax.Device:
    if requested == "cpu":
        return jax.devices("cpu")[0]
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # no GPU backend in this jaxlib, or no GPU
        gpus = []
    if gpus:
        return gpus[0]
    if requested == "cuda":
        raise BackendUnavailable(
            f"framework=jax device=cuda: jax {jax.__version__} sees no GPU here (backend "
            f"{jax.default_backend()}); use device=cpu or device=auto, or install jax[cuda13]"
        )
    return jax.devices("cpu")[0]


def _where(ok: jax.Array, new: Any, old: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)


class JaxBench(SpecBench):
    """The job's workload as its JaxFamily (workloads/<task>/jax.py) builds, runs and scores it."""

    def __init__(self, job: JobConfig) -> None:
        super().__init__(job)
        self.dev = pick_device(job.device)
        jax.config.update("jax_default_device", self.dev)
        # devices>1: one process drives them all; None keeps the one-device path as it was
        self.mesh = DataMesh(mesh_devices(self.dev, job.devices)) if job.devices > 1 else None
        self.local_devices = job.devices
        if self.mesh is not None:
            self._check_mesh_data()
        on_gpu = self.dev.platform == "gpu"
        self.device = f"cuda:{self.dev.id}" if on_gpu else "cpu"
        self.prec = JaxPrecision(plan_precision(job.precision, "cuda" if on_gpu else "cpu"))
        # XLA's RngBitGenerator ("rbg"): a network's initialisers compile in a third of threefry's time on a
        # CPU. The training step draws its dropout masks from framework.prng's generator (rbg: Philox on a
        # GPU, as torch and TF draw theirs); run.prng records it, and the yardsticks' --prng names the same
        init_key, key = jax.random.split(jax.random.key(job.schedule.seed, impl="rbg"))
        if job.framework.prng != "rbg":
            key = jax.random.key(job.schedule.seed, impl=job.framework.prng)
        family = self.load_family(JaxFamily)
        module = family.build_model(job.model, self.prec.compute_dtype, self.prec.param_dtype)
        # compiled: Flax's initialisers run op by op otherwise, seconds for a small network on a CPU
        init = jax.jit(lambda k, xs: family.init(module, k, xs))
        self.net = Network(module, init(init_key, example_inputs(self.spec, np.float32)))
        self.seed_weights(self.net)
        self.net.variables = self._place(self.net.variables)
        self.family_facts = family.run_facts(self.net)
        self.probe = LayerProbe()
        self.loss_fn = family.loss(self.spec)
        fw = job.framework
        self.tx = make_optimizer(self.spec.optimizer) if self.train else None
        if self.train:
            opt_state = self.tx.init(self.net.params)
            # all of it committed to the device: the first step's inputs then look like every later
            # step's outputs, and jit compiles once (an uncommitted optimizer state compiled it twice)
            self.carry = self._place((self.net.variables, opt_state, self.prec.loss_scale(), key))
            donate = (0,) if fw.donate else ()
            self._train = self._jit_train(donate) if fw.jit else self._train_step
        jit_infer = fw.jit and not family.eager_infer
        family.compile_infer(bool(fw.jit))
        self._infer = jax.jit(self._infer_step) if jit_infer else self._infer_step
        self.open_source(self._to_device)
        self._loss: jax.Array | None = None
        self._out: Any = None

    # ---- devices -------------------------------------------------------------------------------
    def _place(self, tree: Any) -> Any:
        """State committed to the job's device, or replicated on every device of the mesh."""
        return jax.device_put(tree, self.dev) if self.mesh is None else self.mesh.replicate(tree)

    def _jit_train(self, donate: tuple[int, ...]) -> Any:
        if self.mesh is None:
            return jax.jit(self._train_step, donate_argnums=donate)
        return self.mesh.jit_step(self._train_step, donate)

    def _check_mesh_data(self) -> None:
        """A mesh's step takes the N per-device batches as one global batch; that is built for the
        synthetic pool (data/generic_formats.open_synthetic), not yet for a task's own varying batches
        or a dataset: one line instead of a run on wrongly sized batches."""
        fmt = data_format(self.job)
        if fmt.name != SYNTHETIC or self.spec.batches is not None:
            raise ConfigError(
                f"devices={self.job.devices} framework=jax: several devices take synthetic data of one "
                f"batch shape for now (model={self.job.model.name}, data={fmt.name}); use devices=1 or "
                "framework=torch"
            )

    def ranks_facts(self) -> dict[str, Any]:
        return self.mesh.facts() if self.mesh is not None else {}

    # ---- data ----------------------------------------------------------------------------------
    def _array(self, array: np.ndarray, is_float: bool, layout: str | None) -> jax.Array:
        """On the device, channels last for Flax: on one device the channels move there (as PyTorch's
        channels-last copy does), not on the host, where a batch of images' transpose costs tens of
        milliseconds that a served query would pay; a mesh shards the host array already moved."""
        if is_float:
            array = array.astype(self.prec.param_dtype, copy=False)
        elif array.dtype == np.int64:  # JAX computes in 32 bits unless x64 is enabled
            array = array.astype(np.int32)
        if self.mesh is not None:
            return self.mesh.shard(channels_last(array, layout) if is_float else array)
        on_device = jax.device_put(array, self.dev)
        return channels_last(on_device, layout) if is_float else on_device

    def _to_device(self, host: HostBatch) -> Batch:
        spec = self.spec
        return Batch(
            tuple(self._array(host.inputs[k], t.is_float, t.layout) for k, t in spec.inputs.items()),
            tuple(
                self._array(host.targets[k], t.is_float, t.layout)
                for k, t in spec.targets.items()
                if k in host.targets
            ),
            host.units,
        )

    # ---- the step ------------------------------------------------------------------------------
    def _train_step(self, carry: tuple, inputs: tuple, targets: tuple) -> tuple[tuple, jax.Array]:
        variables, opt_state, scale, key = carry
        key, dropout, negatives = jax.random.split(key, 3)
        if self.device_negatives:  # drawn inside the compiled step, from JAX's PRNG
            inputs, targets = self.family.add_negatives(inputs, self.spec, negatives)
        params = variables["params"]
        state = {k: v for k, v in variables.items() if k != "params"}

        def loss_of(p):
            out, new_state = self.family.forward(self.net, {**state, "params": p}, inputs, True, dropout)
            return self.loss_fn(out, *targets), new_state

        if scale is None:
            (loss, new_state), grads = jax.value_and_grad(loss_of, has_aux=True)(params)
        else:  # float16: scaled gradients; a step with inf/NaN is skipped and the scale halved
            scale, finite, (loss, new_state), grads = scale.value_and_grad(loss_of, has_aux=True)(params)
        updates, new_opt = self.tx.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        if scale is not None:
            new_params, new_opt = _where(finite, new_params, params), _where(finite, new_opt, opt_state)
        return ({**state, **new_state, "params": new_params}, new_opt, scale, key), loss

    def _infer_step(self, variables: dict, inputs: tuple) -> Any:
        return self.family.infer(self.net, variables, inputs)

    def step(self) -> None:
        batch = self.source.next()
        with self.probe.watch():  # the first call traces the step: the probe sees what jit compiles
            if self.train:
                self.carry, self._loss = self._train(self.carry, batch.inputs, batch.targets)
            else:
                self._out = self._infer(self.net.variables, batch.inputs)
        self.probe.remove()

    @property
    def variables(self) -> dict:
        return self.carry[0] if self.train else self.net.variables

    def predict(self, host: HostBatch) -> Any:
        """The model's outputs for a host batch as float32 numpy (mode=converge scores them with the
        workload's eval): inference mode, the job's precision. While the probe is active (a serving job
        makes no train/infer step) the trace it causes shows the probe what ran."""
        with self.probe.watch():
            out = self._infer(self.variables, self._to_device(host).inputs)
        outs = tuple(np.asarray(o, dtype=np.float32) for o in (out if isinstance(out, tuple) else (out,)))
        return outs[0] if len(outs) == 1 else outs

    def sync(self) -> None:
        jax.block_until_ready(self.carry if self.train else self._out)

    def loss(self) -> float | None:
        return float(self._loss) if self._loss is not None else None

    def memory(self) -> int | None:
        """The allocator's peak on one device: the largest over the mesh's devices with devices>1 (per
        device, as torch's ranks and TF's replicas report it); None on the CPU."""
        if self.dev.platform == "cpu":
            return None
        devices = self.mesh.devices if self.mesh is not None else [self.dev]
        peaks = [(d.memory_stats() or {}).get("peak_bytes_in_use") for d in devices]
        return max((int(p) for p in peaks if p is not None), default=None)

    def precision_report(self) -> dict[str, Any]:
        first = jax.tree.leaves(self.variables["params"])[0]
        scale = self.carry[2] if self.train else None
        return {**self.probe.record.facts(), "param_dtype": dtype_name(first.dtype), **self.prec.flags(scale)}

    def run_facts(self) -> dict[str, Any]:
        fw = self.job.framework
        return {
            **super().run_facts(),
            "optimizer": f"{self.spec.optimizer.kind}/optax" if self.train else "none",
            "memory_format": "NHWC",
            "compiled": "jit" if fw.jit else False,
            "donated": bool(fw.jit and fw.donate and self.train),
            **({"prng": str(jax.random.key_impl(self.carry[3]))} if self.train else {}),
        }

    def params(self) -> int:
        return sum(int(np.prod(p.shape)) for p in jax.tree.leaves(self.variables["params"]))
