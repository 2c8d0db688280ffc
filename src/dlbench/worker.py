"""The worker process: `python -m dlbench.worker --job job.json --events-fd N`.

One per job, in its own process group, under the framework's interpreter (framework.python). It
builds the backend, runs warm-up and timed windows, and reports JSON-line events on the pipe given by
--events-fd. Its stdout/stderr are the job's worker.log. It never imports mlflow or hydra.
With devices=N it is rank 0 of the job and starts ranks 1..N-1 (`--rank r`, no events pipe) in its own
process group (backends/torch/ranks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from dlbench import events
from dlbench.backends.base import BACKENDS
from dlbench.errors import BackendUnavailable

try:  # the job machinery needs numpy: an interpreter without it must still answer in one line
    from dlbench.backends.base import load_backend
    from dlbench.backends.threads import (
        ONE_PROCESS_FRAMEWORKS,
        apply_threads,
        oom_hint,
        rank_threads,
        worker_env,
    )
    from dlbench.config import JobConfig
    from dlbench.converge import run_epochs
    from dlbench.data.registry import data_format
    from dlbench.errors import ConfigError
    from dlbench.timing import fit_steps, timed_windows, warm_up
except ModuleNotFoundError as exc:
    MISSING: ModuleNotFoundError | None = exc
else:
    MISSING = None

EXIT_CONFIG = 3
EXIT_FAILED = 1

_OOM_MARKERS = (
    "out of memory",
    "can't allocate memory",
    "outofmemory",
    "resourceexhausted",
    "failed to allocate",
)


def is_oom(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return isinstance(exc, MemoryError) or any(m in text for m in _OOM_MARKERS)


def oom_fix(job: JobConfig) -> str:
    """What an out-of-memory failure's one line leads with: the batch that did not fit and the setting that
    shrinks it (per device; serving's largest step under LoadGen; the framework's own words follow, for
    where it ran out). The framework's `environment` module may offer a setting of its own after it
    (JAX: the XLA pool taken whole at start, backends/jax/environment.oom_hint)."""
    key, batch = (
        ("serve.max_batch", job.serve.max_batch)
        if job.mode == "serve"
        else ("schedule.batch_size", job.batch_size)
    )
    hint = oom_hint(job.framework.name)
    return f"out of memory at {key}={batch}: lower it" + (f", {hint}" if hint else "")


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker if the orchestrator dies, so no worker outlives its job."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def fed_by_dali(job: JobConfig) -> bool:
    """A data format a DALI pipeline reads (data/registry.py; not synthetic, not one held in memory, e.g.
    MovieLens): only then does the job need DALI, whose version it records. A GPU image without DALI runs the
    rest. mode=data's backend is the DALI pipeline itself and records DALI's version on its own."""
    return job.mode != "data" and data_format(job).dali


def _versions(backend, job: JobConfig) -> dict[str, str]:
    out = backend.versions()
    if fed_by_dali(job):
        from dlbench.data.bench import versions as dali_versions

        out |= dali_versions()
    return out


def framework_for(job: JobConfig) -> tuple[Any, dict[str, int]]:
    """The job's backend module, imported under the environment and CPU threads its worker uses (this
    rank's share with devices>1); returns it with the threads the framework really started. Also in the
    supervisor's environment; repeated here for a worker started by hand, a test or a tool."""
    fw = job.framework.name
    share = rank_threads(job.threads, job.devices, fw)  # devices>1: this rank's share of the threads
    os.environ.update(worker_env(fw, share, job.devices))
    backend = load_backend(fw)
    return backend, apply_threads(fw, share)


def run(
    job: JobConfig,
    emit: events.EventWriter,
    out_dir: Path | None = None,
    rank: int = 0,
    job_file: str | None = None,
) -> None:
    """The job in this process: on one device, or as rank `rank` of `job.devices` (rank 0 starts the
    others from `job_file`)."""
    t0 = time.perf_counter()
    threads: dict[str, int] = {}
    if job.mode == "data":  # the input pipeline alone: DALI, no framework, no model
        from dlbench.data import bench as backend
    else:
        backend, threads = framework_for(job)
    import_s = time.perf_counter() - t0
    if rank > 0 and job.debug.fault == "rank_exit":  # what a rank that cannot start leaves rank 0 with
        print(f"dlbench worker: debug.fault=rank_exit: rank {rank} exits with code 1", file=sys.stderr)
        sys.exit(EXIT_FAILED)
    group = join_ranks(job, rank, job_file, threads, emit)
    try:
        _run_bench(job, backend, emit, out_dir, import_s, threads, group)
    finally:
        if group is not None:
            group.close()


def join_ranks(
    job: JobConfig,
    rank: int,
    job_file: str | None,
    threads: dict[str, int],
    emit: events.EventWriter | events.NullWriter,
) -> Any:
    """devices>1: this process's RankGroup (torch.distributed, backends/torch/ranks.py), after rank 0
    has started the other ranks; None on one device, where nothing of this is imported, and for a
    framework that drives every device from this process (JAX's mesh, TF's MirroredStrategy: no ranks)."""
    if job.devices == 1 or job.framework.name in ONE_PROCESS_FRAMEWORKS:
        return None
    from dlbench.backends.torch.ranks import RankGroup

    def rank_died(dead: int, code: int) -> None:
        """A started rank failed: the others would wait in a collective until the timeout. Say which rank
        and end the job now (rank 0's main thread may be blocked inside torch.distributed)."""
        message = (
            f"rank {dead} of {job.devices} exited with code {code} before the job ended "
            "(its own error is in the job's worker.log)"
        )
        print(f"dlbench worker: {message}", file=sys.stderr, flush=True)
        emit.emit(events.ERROR, kind="crash", message=message)
        os._exit(EXIT_FAILED)

    return RankGroup.join(job, rank, job_file, threads, rank_died if rank == 0 else None)


def _run_bench(
    job: JobConfig,
    backend: Any,
    emit: events.EventWriter | events.NullWriter,
    out_dir: Path | None,
    import_s: float,
    threads: dict[str, int],
    group: Any,
) -> None:
    """Build, warm up, time and report; `group`: this rank's RankGroup on several devices, else None."""
    t1 = time.perf_counter()
    bench = backend.build(job)
    build_s = time.perf_counter() - t1
    emit.emit(
        events.BUILT,
        import_s=import_s,
        build_s=build_s,
        params=bench.params(),
        device=bench.device,
        unit=bench.unit,
        batch_size=job.batch_size,
        versions=_versions(backend, job),
        threads=threads,
        **({"ranks": ranks} if (ranks := _ranks_facts(group, bench)) else {}),
    )
    try:
        fault = {"abort": os.abort, "hang": _hang}.get(job.debug.fault)
        if job.debug.fault == "nan_loss":  # what a diverged training reports
            bench.loss = lambda: float("nan")
        if job.mode == "converge":  # epochs to quality; no warm-up: it would train off the seeded plan
            emit.emit(events.WARMUP_DONE, warmup_s=0.0, steps=0)
            run_epochs(bench, job.schedule.epochs, emit.emit, on_first_step=fault)
        elif job.mode == "serve":  # LoadGen's queries, answered by the inference step
            from dlbench.serving.loadgen_run import run_serve

            served = run_serve(bench, job, out_dir or Path.cwd(), emit.emit)
            emit.emit(events.SERVED, **served)
        else:
            # a source with several batch shapes needs a warm-up step for each (SpecBench.warmup_steps)
            more = getattr(bench, "warmup_steps", None)
            steps = more(job.schedule.warmup_steps) if more else job.schedule.warmup_steps
            start = time.perf_counter()
            warm_up(bench, steps, emit.emit)
            k, probe = fit_steps(bench, job.schedule, group.agree if group is not None else None)
            warmup_s = time.perf_counter() - start
            emit.emit(events.WARMUP_DONE, warmup_s=warmup_s, steps=steps + probe, steps_per_window=k)
            timed_windows(bench, job.schedule, emit.emit, on_first_step=fault, steps=k)
        precision, run_facts, memory = bench.precision_report(), bench.run_facts(), bench.memory()
        gflops = _gflops(backend, job)
        emit.emit(events.DONE, precision=precision, run=run_facts, framework_mem_bytes=memory, gflops=gflops)
    finally:
        bench.close()


def _gflops(backend: Any, job: JobConfig) -> float | None:
    """The network's forward GFLOPs as its framework counts them (None: the backend has no count). After
    the timing, so it costs no startup time; kept on disk (backends/stats_cache.py), so a sweep's other
    precisions and batch sizes do not count the same network again."""
    stats = getattr(backend, "model_stats", None)
    if stats is None:
        return None
    from dlbench.backends.stats_cache import cached_gflops, stats_key
    from dlbench.workloads.registry import workloads

    key = stats_key(job.framework.name, backend.versions(), job.model, workloads()[job.model.task].package)
    return cached_gflops(key, lambda: stats(job.model)["gflops"])


def _ranks_facts(group: Any, bench: Any) -> dict[str, Any]:
    """What runs the job's devices, for the `ranks.*` params: torch's process group, or the bench's own
    facts where one process drives them all (JAX's mesh); {} on one device."""
    return group.facts if group is not None else getattr(bench, "ranks_facts", dict)()


def _hang() -> None:
    """debug.fault=hang: say so on stdout and stderr, then wait to be killed (what kill -9 leaves)."""
    print("dlbench worker: debug.fault=hang: waiting here until killed", flush=True)
    print("dlbench worker: debug.fault=hang (stderr)", file=sys.stderr, flush=True)
    time.sleep(24 * 3600)


def missing_module_message(plain: dict, exc: ModuleNotFoundError) -> str:
    """One line for an interpreter that lacks what the job needs (numpy, the framework): which module,
    which interpreter, and the pip command for the job's framework."""
    name = (plain.get("framework") or {}).get("name", "torch")
    pip = BACKENDS.get(name, BACKENDS["torch"])[2]
    pip += "" if "numpy" in pip else " numpy==1.26.4"
    return (
        f"framework={name}: {exc.name} is not installed in {sys.executable}; install it with "
        f"`{sys.executable} -m {pip}` or point framework.python at an interpreter that has it"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--job", required=True, help="resolved job config (JSON)")
    parser.add_argument("--events-fd", type=int, required=True, help="pipe for JSON-line events")
    parser.add_argument("--rank", type=int, default=0, help="devices>1: this rank (rank 0 starts the others)")
    args = parser.parse_args(argv)
    _die_with_parent()
    emit = events.EventWriter(args.events_fd) if args.rank == 0 else events.NullWriter()
    emit.emit(events.HELLO, pid=os.getpid(), python=sys.executable)
    with open(args.job) as f:
        plain = json.load(f)
    if MISSING is not None:
        message = missing_module_message(plain, MISSING)
        emit.emit(events.ERROR, kind="config", message=message)
        print(f"dlbench worker: {message}", file=sys.stderr)
        return EXIT_CONFIG
    job = JobConfig.from_dict(plain)
    try:
        # the job's folder: LoadGen's logs go there
        run(job, emit, Path(args.job).resolve().parent, args.rank, str(Path(args.job).resolve()))
    except (BackendUnavailable, ConfigError) as exc:
        emit.emit(events.ERROR, kind="config", message=str(exc))
        print(f"dlbench worker: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except Exception as exc:
        traceback.print_exc()
        message = f"{type(exc).__name__}: {exc}"
        kind = "oom" if is_oom(exc) else "crash"
        if kind == "oom":
            message = f"{oom_fix(job)}; {message}"
        emit.emit(events.ERROR, kind=kind, message=message[:2000])
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
