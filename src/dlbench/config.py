"""The job configuration: one schema for Hydra (validation) and for the worker (plain dataclasses).

Hydra composes `conf/` on top of these dataclasses, so an unknown key or a value of the wrong type
fails at composition with Hydra's own message. `validate()` adds the checks a schema cannot express.
This module imports neither Hydra nor a framework: the worker builds a `JobConfig` from JSON with
`JobConfig.from_dict`. Hydra registration lives in `register_configs()`, imported lazily.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from dlbench.core.execution import EXECUTIONS
from dlbench.core.spec import ModelConfig
from dlbench.errors import ConfigError

FRAMEWORKS = ("torch", "tf", "mxnet", "jax")
MODES = ("train", "infer", "data", "converge", "serve")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "float16", "bfloat16")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OPTIMIZER_IMPLS = ("auto", "fused", "foreach")
PRNG_IMPLS = ("rbg", "threefry2x32")


@dataclass
class FrameworkConfig:
    """The keys every framework has. Each framework's own knobs live in its schema below, registered as
    its own Hydra option, so `framework=tf framework.compile=true` is refused at composition."""

    name: str = "torch"
    # Interpreter that runs this framework's worker; null = the interpreter running dlbench.
    python: str | None = None


@dataclass
class TorchConfig(FrameworkConfig):
    name: str = "torch"
    compile: bool = False  # wrap the model in torch.compile
    compile_mode: str = "default"  # torch.compile mode, one of COMPILE_MODES
    # SGD/Adam implementation. fused = one kernel, and with fp16 loss scaling it checks for overflow on
    # the GPU instead of syncing the host every step; auto = fused on CUDA, foreach elsewhere.
    optimizer_impl: str = "auto"


@dataclass
class TFConfig(FrameworkConfig):
    name: str = "tf"
    xla: bool = False  # jit_compile the train/infer step


@dataclass
class MXNetConfig(FrameworkConfig):
    name: str = "mxnet"
    hybridize: bool = True  # hybridize the Gluon block


@dataclass
class JaxConfig(FrameworkConfig):
    name: str = "jax"
    jit: bool = True  # jax.jit-compile the train/infer step (false: op-by-op dispatch)
    donate: bool = True  # donate the step's parameter and optimizer buffers to its outputs (jit only)
    # the training step's PRNG key, one of PRNG_IMPLS: where dropout masks come from. rbg is XLA's
    # RngBitGenerator (Philox on a GPU, as torch and TF draw dropout), threefry2x32 JAX's default; neither
    # is faster at every precision on a GPU, so the choice is the user's and each run records it
    prng: str = "rbg"


# framework.name -> its schema (conf/framework/<name>.yaml uses `<name>_schema`)
FRAMEWORK_CONFIGS: dict[str, type[FrameworkConfig]] = {
    "torch": TorchConfig,
    "tf": TFConfig,
    "mxnet": MXNetConfig,
    "jax": JaxConfig,
}


@dataclass
class DatasetConfig:
    name: str = "synthetic"
    path: str | None = None
    format: str | None = (
        None  # a registered data format (data/registry.py); null: the task's default or detected
    )
    path_env: str | None = None  # environment variable that supplies path when path is null
    num_samples: int | None = (
        None  # null = all the files found (in-memory datasets: the first N training samples)
    )
    eval_samples: int | None = None  # in-memory datasets: the first N held-out samples (null = all)


@dataclass
class DataConfig:
    """How the DALI pipeline reads, decodes and feeds the data (real datasets only)."""

    decode: str = "auto"  # auto (GPU when there is one) | gpu | cpu
    num_threads: int = 4
    prefetch: int = 2  # DALI prefetch queue depth (>= 2 to overlap input with compute)
    shuffle: bool = True
    shard_id: int = 0
    num_shards: int = 1
    skip_corrupt: bool = False  # true: skip and count undecodable images instead of failing
    skip_bad_boxes: bool = False  # COCO: true leaves out (and counts) boxes that cannot train, else one line
    seed: int = 42
    hflip: bool = False  # in-memory datasets: mirror each image left-right with probability 1/2 (seeded)


@dataclass
class PrecisionConfig:
    name: str = "fp32"
    autocast: bool = False  # mixed precision: float32 weights, reduced-precision compute
    dtype: str = "float32"  # compute dtype on CUDA
    cpu_dtype: str = "float32"  # compute dtype on CPU (fp16 autocast has no fast CPU kernels)
    loss_scale: str = "none"  # none | dynamic (applies when the compute dtype is float16)
    allow_tf32: bool = False  # TF32 tensor-core math for float32 matmul/conv on Ampere+


@dataclass
class ScheduleConfig:
    warmup_steps: int = 20
    steps_per_window: int = 20
    windows: int = 10
    batch_size: int | None = None  # null = model.batch_size
    repeats: int = 1
    # about this many timed seconds per repeat: a probe after warm-up (min_timed_s / windows seconds) times
    # the step, and every window then runs the steps that takes (never fewer than steps_per_window; null: as
    # configured). train and infer only: converge runs epochs, serve LoadGen's own minimum duration.
    # A fast GPU finishes a fixed schedule in under a second, too short for 10 Hz telemetry to mean much.
    min_timed_s: float | None = None
    # mode=converge (docs/architecture.md, "Accuracy"): passes over the training split, the held-out metric
    # to reach (epochs and seconds to it are logged), and the seed of data order, augmentation and initial
    # weights; `seeds` runs the job once per seed, each its own MLflow run (empty = [seed]).
    epochs: int = 1
    target: float | None = None
    seed: int = 0
    seeds: list[int] = field(default_factory=list)


@dataclass
class ServeConfig:
    """mode=serve: MLPerf's LoadGen issues the queries (dlbench/serving). Each key maps onto one LoadGen
    TestSetting with its meaning; null leaves LoadGen's default or, where marked, an estimate the warm-up
    measures, so that the run lasts about min_duration_s without the user guessing the machine's speed."""

    scenario: str = "single_stream"  # single_stream | multi_stream | server | offline
    max_batch: int = 8  # most samples one inference step answers (server, offline, multi_stream coalesce)
    # the sizes a step runs at: a taken batch is padded up to the smallest that holds it (one compilation
    # per size); null: powers of two below max_batch and max_batch; a list's largest must be max_batch
    batch_sizes: list[int] | None = None
    min_duration_s: float = 10.0  # LoadGen min_duration_ms: the run lasts at least this long
    max_duration_s: float | None = None  # max_duration_ms (null: no limit)
    # min_query_count: at least this many queries (offline: samples); null: 662 in MultiStream (the fewest its
    # early-stopping p99 accepts), 100 otherwise
    min_query_count: int | None = None
    max_query_count: int | None = None  # max_query_count (null: no limit)
    # server: server_target_qps (the Poisson rate); offline: offline_expected_qps (null: 1.5 x the
    # warm-up's samples/s at max_batch, loadgen_run.OFFLINE_HEADROOM)
    target_qps: float | None = None
    latency_bound_ms: float | None = None  # server: server_target_latency_ns, the p99 bound (null: 100 ms)
    # single_stream / multi_stream expected latency of one query (null: the warm-up's fastest step at the
    # size a query runs at)
    expected_latency_ms: float | None = None
    samples_per_query: int = 8  # multi_stream_samples_per_query
    sample_count: int = 256  # samples the QSL holds in host memory (performance_sample_count)
    seed: int = 0  # qsl / sample index / schedule RNG seeds
    # server: search the highest target_qps whose p99 meets latency_bound_ms with short trials of
    # search_step_s, within search_budget_s, then one confirming test with the settings above
    search: bool = False
    search_budget_s: float = 60.0
    search_step_s: float = 2.0


@dataclass
class TelemetryConfig:
    enabled: bool = True
    interval_s: float = 0.1


@dataclass
class ReportConfig:
    enabled: bool = True  # log the comparison report on the parent run at the end of a multirun
    # Accuracy verdicts (report/equivalence.py): a precision matches fp32 only when the confidence interval
    # of the difference lies inside ±δ. `delta` gives δ per metric in its own units (report.delta.accuracy=
    # 0.005: half a point; BLEU in BLEU points); null gets `equivalence` times fp32's mean (0.01: MLPerf's
    # quality targets are about 99% of the reference).
    equivalence: float = 0.01
    delta: dict[str, float | None] = field(
        default_factory=lambda: {"accuracy": None, "hr10": None, "map50": None, "bleu": None}
    )


@dataclass
class TrackingConfig:
    # null = $MLFLOW_TRACKING_URI, else sqlite:///<project root>/mlflow.db
    uri: str | None = None
    experiment: str = "dlbench"


@dataclass
class GuardConfig:
    # true: refuse to start a job while another process uses its GPU (NVML's compute processes); false:
    # run, but tag the run dlbench.gpu_flag=shared and warn (telemetry/guards.py)
    exclusive: bool = False


@dataclass
class DebugConfig:
    # Fault injection for the failure paths' tests: "abort" makes the worker abort (SIGABRT) at its
    # first timed step, "hang" makes it print a line and wait there to be killed; "nan_loss" makes it report
    # a NaN loss for every window; "rank_exit" makes ranks 1..N-1 of a torch job on several devices exit
    # with code 1 before the rendezvous. Never set in a real run.
    fault: str | None = None


@dataclass
class JobConfig:
    # The framework's own schema, chosen by framework.name.
    framework: FrameworkConfig = field(default_factory=TorchConfig)
    # The model family's own schema (workloads/<task>/spec.py), chosen by model.task.
    model: ModelConfig = field(default_factory=lambda: _model_config_type("classification")())
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    data: DataConfig = field(default_factory=DataConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    guard: GuardConfig = field(default_factory=GuardConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)
    mode: str = "train"
    device: str = "auto"
    # Whole-job limit (start to end). FP32 cuDNN autotuning alone has taken minutes on big GPUs.
    timeout_s: float = 3600.0
    fail_fast: bool = False
    # Skip a job whose configuration already has a FINISHED run in the experiment (tracking/resume.py).
    resume: bool = False
    # CPU threads per op (and inter-op) in every framework; null = the CPUs in the worker's affinity.
    threads: int | None = None
    # eager | compiled: the framework-neutral execution mode (core/execution.py); null = framework knobs.
    execution: str | None = None
    # Data-parallel training of one job (torch: ranks; jax: one process over a mesh; tf: MirroredStrategy):
    # schedule.batch_size is per device, each device trains on its own batch, so the global batch is
    # batch_size x devices (as torchrun scripts mean it).
    devices: int = 1
    # framework name -> the interpreter its workers run under where framework.python is null, so one sweep
    # crosses frameworks that live in environments of their own (conf/local: pythons: {tf: /opt/tf/bin/python})
    pythons: dict[str, str | None] = field(default_factory=lambda: dict.fromkeys(FRAMEWORKS))

    @property
    def batch_size(self) -> int:
        """Per device: what one rank's step takes (the global batch is `global_batch_size`)."""
        b = self.schedule.batch_size
        return self.model.batch_size if b is None else b

    @property
    def global_batch_size(self) -> int:
        """What one step of the whole job takes, over its `devices` ranks."""
        return self.batch_size * self.devices

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobConfig:
        """Build from a plain (resolved) dict, ignoring keys the schema does not know (e.g. hydra)."""
        return _from_dict(cls, data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _from_dict(cls: type, data: dict[str, Any]) -> Any:
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        sub = _dataclass_type(f)
        if sub is not None and issubclass(sub, ModelConfig):  # the family's schema, by model.task
            sub = _model_config_type((value or {}).get("task", "classification"))
        elif sub is not None and issubclass(sub, FrameworkConfig):  # the framework's schema, by name
            sub = FRAMEWORK_CONFIGS.get((value or {}).get("name", "torch"), FrameworkConfig)
        kwargs[f.name] = _from_dict(sub, value or {}) if sub else value
    return cls(**kwargs)


def _model_config_type(task: str) -> type[ModelConfig]:
    """The family's schema of `task`, from the task registry, imported only when a job is built: the
    schema module itself loads no workload code."""
    from dlbench.workloads.registry import model_config_type

    return model_config_type(task)


def _dataclass_type(f: dataclasses.Field) -> type | None:
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        made = f.default_factory()  # type: ignore[misc]
        return type(made) if dataclasses.is_dataclass(made) else None
    return None


def validate(job: JobConfig) -> None:
    """Raise ConfigError (one line: the key, the value, the fix) for a job that cannot run."""
    checks = [
        (job.framework.name in FRAMEWORKS, f"framework.name={job.framework.name!r}: use one of {FRAMEWORKS}"),
        (job.mode in MODES, f"mode={job.mode!r}: use one of {MODES}"),
        (job.device in DEVICES, f"device={job.device!r}: use one of {DEVICES}"),
        (job.precision.dtype in DTYPES, f"precision.dtype={job.precision.dtype!r}: use one of {DTYPES}"),
        (
            job.precision.cpu_dtype in DTYPES,
            f"precision.cpu_dtype={job.precision.cpu_dtype!r}: use one of {DTYPES}",
        ),
        (job.precision.loss_scale in ("none", "dynamic"), "precision.loss_scale: use none or dynamic"),
        (job.batch_size >= 1, f"schedule.batch_size={job.batch_size}: use 1 or more"),
        (job.schedule.warmup_steps >= 0, "schedule.warmup_steps: must be 0 or more"),
        (job.schedule.steps_per_window >= 1, "schedule.steps_per_window: must be 1 or more"),
        (job.schedule.windows >= 1, "schedule.windows: must be 1 or more"),
        (job.schedule.repeats >= 1, "schedule.repeats: must be 1 or more"),
        (
            job.schedule.min_timed_s is None or job.schedule.min_timed_s > 0,
            f"schedule.min_timed_s={job.schedule.min_timed_s}: use seconds > 0, or null to time the windows as set",
        ),
        (job.schedule.epochs >= 1, "schedule.epochs: must be 1 or more"),
        (
            job.mode != "converge" or job.schedule.repeats == 1,
            "schedule.repeats: mode=converge repeats a training once per seed; use schedule.seeds=[...] instead",
        ),
        (
            min([job.schedule.seed, *job.schedule.seeds]) >= 0,
            f"schedule.seeds={job.schedule.seeds or [job.schedule.seed]}: seeds must be 0 or more",
        ),
        (
            job.telemetry.interval_s > 0,
            "telemetry.interval_s: must be > 0 (use telemetry.enabled=false to turn it off)",
        ),
        (job.timeout_s > 0, "timeout_s: must be > 0"),
        (
            set(job.pythons) <= set(FRAMEWORKS),
            f"pythons: {sorted(set(job.pythons) - set(FRAMEWORKS))} are not frameworks; use keys of {FRAMEWORKS}",
        ),
        (
            job.report.equivalence > 0 and all(v is None or v > 0 for v in job.report.delta.values()),
            "report.equivalence and report.delta: an equivalence margin must be > 0",
        ),
        (
            job.threads is None or job.threads >= 1,
            f"threads={job.threads}: use 1 or more, or null (all CPUs)",
        ),
        (
            job.debug.fault in (None, "abort", "hang", "nan_loss", "rank_exit"),
            "debug.fault: only null, abort, hang, nan_loss or rank_exit",
        ),
        (
            job.execution in EXECUTIONS,
            f"execution={job.execution!r}: use eager or compiled (or null: the framework's own knobs)",
        ),
    ]
    checks += devices_problems(job)
    fw = job.framework
    if isinstance(fw, JaxConfig):
        checks.append((fw.prng in PRNG_IMPLS, f"framework.prng={fw.prng!r}: use one of {PRNG_IMPLS}"))
    if isinstance(fw, TorchConfig):
        checks += [
            (
                fw.compile_mode in COMPILE_MODES,
                f"framework.compile_mode={fw.compile_mode!r}: use one of {COMPILE_MODES}",
            ),
            (
                fw.optimizer_impl in OPTIMIZER_IMPLS,
                f"framework.optimizer_impl={fw.optimizer_impl!r}: use one of {OPTIMIZER_IMPLS}",
            ),
        ]
    from dlbench.data.registry import data_format, mode_problem
    from dlbench.serving.settings import serve_problems
    from dlbench.workloads.registry import unknown_task

    if job.mode == "serve":
        checks += serve_problems(job.serve, job.model.task, job.dataset.name)

    if (why := unknown_task(job.model.task)) is not None:
        raise ConfigError(why)
    for ok, message in [*checks, *job.model.check()]:
        if not ok:
            raise ConfigError(message)
    fmt = data_format(job)
    if (why := mode_problem(fmt, job)) is not None:
        raise ConfigError(why)
    d = job.dataset
    if fmt.dali and not d.path and not (d.path_env and os.environ.get(d.path_env)):
        hint = f" or set ${d.path_env}" if d.path_env else ""
        raise ConfigError(f"dataset={d.name} needs dataset.path (a folder with the data){hint}")


# Data-parallel training is built for these so far: torch as ranks, JAX as one process over a device mesh,
# TF as one process with MirroredStrategy
MULTI_DEVICE_FRAMEWORKS = (
    "torch",
    "jax",
    "tf",
)


def devices_problems(job: JobConfig) -> list[tuple[bool, str]]:
    """devices: a whole number >= 1; more than one only where data parallelism is built (torch, jax, tf;
    mode=train), so a sweep over devices refuses the other cells in one line each instead of running them
    on one. TF's XLA step cannot run mirrored here (the compiled replica function cannot reach the other
    replicas' variables on logical CPU devices), so framework.xla with devices>1 is refused too."""
    n = job.devices
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        return [(False, f"devices={n!r}: use a whole number, 1 or more")]
    fw = job.framework.name
    return [
        (
            n == 1 or fw in MULTI_DEVICE_FRAMEWORKS,
            f"devices={n}: framework={fw} runs on one device for now; several devices: "
            f"framework={' or '.join(MULTI_DEVICE_FRAMEWORKS)}",
        ),
        (n == 1 or job.mode == "train", f"devices={n}: mode={job.mode} runs on one device; use mode=train"),
        (
            n == 1 or fw != "tf" or not getattr(job.framework, "xla", False),
            f"devices={n}: framework=tf with framework.xla=true runs on one device; use framework.xla=false",
        ),
    ]


def register_configs() -> None:
    """Register the schema with Hydra so every yaml under conf/ is validated against it."""
    from hydra.core.config_store import ConfigStore

    from dlbench.launchers import register_launchers
    from dlbench.workloads.registry import workloads

    register_launchers()
    cs = ConfigStore.instance()
    # The job schema's model and framework nodes are the common bases, so any family's or framework's
    # schema (a subclass) can be merged in by conf/model/<name>.yaml or conf/framework/<name>.yaml;
    # OmegaConf refuses to merge one subclass into another's node.
    schema = JobConfig()
    schema.model, schema.framework = ModelConfig(), FrameworkConfig()
    cs.store(name="dlbench_schema", node=schema)
    for name, node in FRAMEWORK_CONFIGS.items():  # framework/<name>_schema: that framework's knobs only
        cs.store(group="framework", name=f"{name}_schema", node=node)
    for task, entry in workloads().items():  # model/<task>_schema: a family's own keys, nothing else
        if not entry.test_only:
            cs.store(group="model", name=f"{task}_schema", node=entry.config)
    for group, node in (
        ("dataset", DatasetConfig),
        ("precision", PrecisionConfig),
        ("tracking", TrackingConfig),
    ):
        cs.store(group=group, name=f"{group}_schema", node=node)
