"""mode=serve inside the worker: MLPerf's LoadGen issues queries, the bench's inference step answers them.

One generic answer for every framework: `bench.predict(host batch)` is the job's inference step as the bench
built it (eager or compiled as configured) from host samples to host outputs, so a query's latency covers
what a server does with a request: gather its samples, put them on the device, infer, read the answer back.
LoadGen's StartTest runs in a thread of its own; the main thread (where the framework was set up) answers,
taking up to serve.max_batch pending samples per step: one per query in SingleStream, a query's samples in
MultiStream, whatever queued up in Server, chunks of the one big query in Offline. A step runs padded up to
one of serve.batch_sizes, so a compiling framework compiles those few shapes only (in the warm-up).
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg
import numpy as np

from dlbench.config import JobConfig, ServeConfig
from dlbench.data.synthetic import HostBatch, synthetic_batch
from dlbench.serving.settings import (
    DEFAULT_LATENCY_BOUND_MS,
    QUERY_ROWS,
    SCENARIOS,
    allowed_batch_sizes,
    min_queries,
)

NS_PER_MS = 1_000_000
# Offline's expected samples/s is the warm-up's rate at max_batch times this: LoadGen sizes its one query
# from the expectation, and a test that runs faster than expected ends before min_duration and is INVALID
# (a TF NCF job on an H200 served 6,454 samples/s against a warm-up estimate of 5,634). Expecting more
# only makes the test longer.
OFFLINE_HEADROOM = 1.5


class SampleLibrary:
    """LoadGen's query sample library: `sample_count` synthetic samples held in host memory (load/unload
    are no-ops: they never leave it). A sample is QUERY_ROWS[task] consecutive rows of the task's inputs
    (an image; a user's candidate list, ids drawn per row: the network's work does not depend on their
    values). A query's samples are gathered by index into one host batch."""

    def __init__(self, bench: Any, count: int) -> None:
        self.rows = QUERY_ROWS[bench.spec.task]
        self.pool = synthetic_batch(bench.spec, count * self.rows)
        self.count = count

    def batch(self, indices: list[int]) -> HostBatch:
        idx = (np.asarray(indices)[:, None] * self.rows + np.arange(self.rows)).reshape(-1)
        pick = lambda arrays: {k: v[idx] for k, v in arrays.items()}  # noqa: E731
        return HostBatch(pick(self.pool.inputs), pick(self.pool.targets), len(indices))

    def warmup_indices(self, size: int) -> list[list[int]]:
        """The batches the warm-up runs at `size`: one, as every batch of a size has one shape."""
        return [[i % self.count for i in range(size)]]


class SentenceLibrary:
    """Translation's query sample library: one sample is one synthetic sentence pair (lengths as
    model.lengths draws them). A step's sentences are padded to the batch's longest side, rounded up to
    the translation pipeline's BUCKET multiple (a few shapes, each met in the warm-up), and decoded greedily
    for that many steps, as mode=infer does."""

    rows = 1

    def __init__(self, job: JobConfig, count: int) -> None:
        from dlbench.workloads.translation.token_batches import bucket, synthetic_pairs

        cfg = job.model
        length = cfg.max_len - 1 if cfg.lengths == "fixed" else None
        rng = np.random.default_rng(job.serve.seed)
        self.pairs = synthetic_pairs(count, cfg.vocab, rng, length=length, max_len=cfg.max_len - 1)
        self.widths = [bucket(max(len(s), len(t)) + 1) for s, t in self.pairs]  # EOS / BOS added
        self.count = count

    def batch(self, indices: list[int]) -> HostBatch:
        from dlbench.workloads.translation.source import host_batch
        from dlbench.workloads.translation.token_batches import make_batch

        width = max(self.widths[i] for i in indices)
        return host_batch(make_batch([self.pairs[i] for i in indices], width), train=False)

    def warmup_indices(self, size: int) -> list[list[int]]:
        """One batch of `size` per padded length the samples have: every shape a step can meet."""
        first = {w: i for i, w in reversed(list(enumerate(self.widths)))}
        return [[first[w]] * size for w in sorted(first)]


def sample_library(bench: Any, job: JobConfig) -> SampleLibrary | SentenceLibrary:
    """The task's query sample library: sentences for translation, rows of synthetic inputs otherwise."""
    if bench.spec.task == "translation":
        return SentenceLibrary(job, job.serve.sample_count)
    return SampleLibrary(bench, job.serve.sample_count)


def padded(indices: list[int], sizes: list[int]) -> list[int]:
    """`indices` grown to the smallest allowed size that holds them by repeating the last one: the step
    runs at a shape it was warmed up (compiled) at; the padding's answers are dropped."""
    size = next(s for s in sizes if s >= len(indices))
    return indices + indices[-1:] * (size - len(indices))


class Answerer:
    """The system under test: LoadGen's issue callback only queues the samples; `serve_until` answers
    them on the calling thread, at most `max_batch` per inference step, each step padded up to one of
    `sizes`. Counts steps, real samples and padding samples, and the sizes the steps really ran at."""

    def __init__(self, bench: Any, library: SampleLibrary | SentenceLibrary, sizes: list[int]) -> None:
        self.bench, self.library, self.sizes = bench, library, sizes
        self.max_batch = sizes[-1]
        self.pending: queue.SimpleQueue = queue.SimpleQueue()
        self.steps = self.samples = self.padding = 0
        self.ran: set[int] = set()  # the batch sizes bench.predict met

    def step(self, indices: list[int]) -> None:
        """One inference step on these samples (numpy out: done on the device)."""
        self.bench.predict(self.library.batch(indices))
        self.ran.add(len(indices))

    def issue(self, query_samples: list) -> None:
        for q in query_samples:
            self.pending.put((q.id, q.index))

    def _take(self) -> list[tuple[int, int]]:
        taken = [self.pending.get(timeout=0.01)]
        while len(taken) < self.max_batch:
            try:
                taken.append(self.pending.get_nowait())
            except queue.Empty:
                break
        return taken

    def answer(self, taken: list[tuple[int, int]]) -> None:
        batch = padded([index for _, index in taken], self.sizes)
        self.step(batch)
        lg.QuerySamplesComplete([lg.QuerySampleResponse(qid, 0, 0) for qid, _ in taken])  # real ones only
        self.steps += 1
        self.samples += len(taken)
        self.padding += len(batch) - len(taken)

    def serve_until(self, done: threading.Event) -> None:
        while not (done.is_set() and self.pending.empty()):
            try:
                taken = self._take()
            except queue.Empty:
                continue
            self.answer(taken)


def warm_up(answerer: Answerer, reps: int, query_samples: int = 1) -> dict[str, float]:
    """Every allowed batch size once (the only shapes a step meets), so none is first traced, compiled or
    bound in the test, then at least 3 timed steps at the smallest size, at max_batch and at the size a
    query of `query_samples` runs at: the estimates LoadGen is told when the user gives none (a lone query
    runs at the smallest size, a MultiStream query at the size holding its samples). The fastest step counts,
    so that LoadGen plans enough queries for its minimum duration even when the steps get faster once warm.
    The layer probe has seen a real step by then and is removed."""
    bench, sizes = answerer.bench, answerer.sizes
    for size in sizes:
        for indices in answerer.library.warmup_indices(size):  # a sentence length's shapes too
            answerer.step(indices)
            probe = getattr(bench, "probe", None)
            if probe is not None and getattr(probe, "active", False):
                probe.remove()

    @functools.cache  # each size timed once, however many estimates ask for it
    def fastest(size: int) -> float:
        times = []
        for _ in range(max(reps, 3)):
            t = time.perf_counter()
            answerer.step(answerer.library.warmup_indices(size)[0])
            times.append(time.perf_counter() - t)
        return min(times)

    return {
        "latency_1_ms": 1000 * fastest(sizes[0]),
        "samples_per_s_max_batch": sizes[-1] / fastest(sizes[-1]),
        "latency_query_ms": 1000 * query_latency(query_samples, sizes, fastest),
    }


def query_latency(samples: int, sizes: list[int], fastest: Any) -> float:
    """Seconds a query of `samples` takes when answered alone: full steps of max_batch, then one step at
    the allowed size that holds the rest (each step's time from `fastest(size)`)."""
    full, rest = divmod(samples, sizes[-1])
    seconds = full * fastest(sizes[-1]) if full else 0.0
    return seconds + (fastest(next(s for s in sizes if s >= rest)) if rest else 0.0)


def test_settings(serve: ServeConfig, estimates: dict[str, float]) -> lg.TestSettings:
    """serve.* as LoadGen TestSettings, in LoadGen's units; performance mode only."""
    s = lg.TestSettings()
    s.scenario = getattr(lg.TestScenario, SCENARIOS[serve.scenario])
    s.mode = lg.TestMode.PerformanceOnly
    s.min_duration_ms = int(serve.min_duration_s * 1000)
    s.max_duration_ms = int((serve.max_duration_s or 0) * 1000)  # 0: no limit
    s.min_query_count = min_queries(serve)
    s.max_query_count = serve.max_query_count or 0
    single = serve.expected_latency_ms or estimates["latency_1_ms"]
    multi = serve.expected_latency_ms or estimates["latency_query_ms"]
    s.single_stream_expected_latency_ns = max(int(single * NS_PER_MS), 1)
    s.multi_stream_expected_latency_ns = max(int(multi * NS_PER_MS), 1)
    s.multi_stream_samples_per_query = serve.samples_per_query
    s.offline_expected_qps = serve.target_qps or OFFLINE_HEADROOM * estimates["samples_per_s_max_batch"]
    s.server_target_qps = serve.target_qps or 0.5 * estimates["samples_per_s_max_batch"]
    s.server_target_latency_ns = int((serve.latency_bound_ms or DEFAULT_LATENCY_BOUND_MS) * NS_PER_MS)
    s.qsl_rng_seed = s.sample_index_rng_seed = s.schedule_rng_seed = serve.seed
    return s


def log_settings(out_dir: Path) -> lg.LogSettings:
    """LoadGen's mlperf_log_* files go to the job's own folder, never the working directory."""
    ls = lg.LogSettings()
    ls.log_output.outdir = str(out_dir)
    ls.log_output.copy_summary_to_stdout = False
    return ls


def one_test(answerer: Answerer, settings: lg.TestSettings, out_dir: Path) -> dict[str, Any]:
    """One LoadGen test: StartTest in its own thread, the answers on this one; logs into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sut = lg.ConstructSUT(answerer.issue, lambda: None)
    count = answerer.library.count
    qsl = lg.ConstructQSL(count, count, lambda s: None, lambda s: None)
    done = threading.Event()
    logs = log_settings(out_dir)

    def test() -> None:
        try:
            lg.StartTestWithLogSettings(sut, qsl, settings, logs)
        finally:
            done.set()

    tester = threading.Thread(target=test, name="loadgen", daemon=True)
    t0, steps, samples, padding = time.time(), answerer.steps, answerer.samples, answerer.padding
    tester.start()
    # A failing step raises out of here: LoadGen's thread, still waiting for answers, dies with the process.
    answerer.serve_until(done)
    tester.join()
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
    return {
        "log_dir": str(out_dir),
        "t_start": t0,
        "seconds": time.time() - t0,
        "steps": answerer.steps - steps,
        "samples": answerer.samples - samples,
        "padding": answerer.padding - padding,
    }


def search_settings(serve: ServeConfig, estimates: dict[str, float], qps: float) -> lg.TestSettings:
    """A short Server trial at `qps`: serve.search_step_s long, the bound and seeds as configured."""
    s = test_settings(serve, estimates)
    s.server_target_qps = qps
    s.min_duration_ms = int(serve.search_step_s * 1000)
    s.max_duration_ms = int(2 * serve.search_step_s * 1000)
    s.min_query_count = 1
    return s


def run_serve(bench: Any, job: JobConfig, out_dir: Path, emit: Any) -> dict[str, Any]:
    """Warm up, (Server with serve.search: find the peak rate,) run LoadGen's test, return what the
    `served` event reports (the summary is parsed by the orchestrator from the file itself)."""
    serve = job.serve
    library = sample_library(bench, job)
    answerer = Answerer(bench, library, allowed_batch_sizes(serve))
    start = time.perf_counter()
    query = serve.samples_per_query if serve.scenario == "multi_stream" else 1
    estimates = warm_up(answerer, job.schedule.warmup_steps, query)
    emit("warmup_done", warmup_s=time.perf_counter() - start, steps=len(answerer.sizes))
    warmup_sizes, answerer.ran = sorted(answerer.ran), set()
    settings, search = test_settings(serve, estimates), {}
    if serve.search:
        from dlbench.serving.search import find_peak_qps

        def trial(qps: float, folder: Path) -> None:
            one_test(answerer, search_settings(serve, estimates, qps), folder)

        peak, trials = find_peak_qps(
            trial, settings.server_target_qps, serve.search_budget_s, out_dir / "search"
        )
        # none met the bound: confirm at the slowest rate tried, so the verdict says so
        settings.server_target_qps = peak or min(t["qps"] for t in trials)
        search = {"peak_qps": peak, "trials": trials}
    facts = {"estimates": estimates, "search": search, "rows_per_sample": library.rows}
    result = one_test(
        answerer, settings, out_dir
    )  # step_sizes: the sizes the test's (and search's) steps ran at
    return result | facts | {"warmup_sizes": warmup_sizes, "step_sizes": sorted(answerer.ran)}
