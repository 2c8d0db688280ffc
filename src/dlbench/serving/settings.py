"""The serve scenarios and the checks a serve config must pass before anything runs (one line each).

Framework-free and LoadGen-free: config.validate calls `serve_problems` in the orchestrator's process.
"""

from __future__ import annotations

from typing import Any

# serve.scenario -> LoadGen's TestScenario name
SCENARIOS = {
    "single_stream": "SingleStream",
    "multi_stream": "MultiStream",
    "server": "Server",
    "offline": "Offline",
}
# The tasks served so far, and how many of the task's rows one LoadGen query sample is: one image; one
# user's candidate list (the held-out item and the 100 negatives HR@10 ranks it among); one image for
# detection (the forward pass, with model.postprocess=true box decoding and NMS too); one sentence for
# translation (greedy decoding, the batch padded to its longest sentence).
QUERY_ROWS = {"classification": 1, "recommendation": 101, "detection": 1, "translation": 1}
SERVED_TASKS = tuple(QUERY_ROWS)
DEFAULT_LATENCY_BOUND_MS = 100.0  # server: a bound must be given to LoadGen; MLPerf's ResNet-50 one is 15 ms
# serve.min_query_count=null: the fewest queries whose test LoadGen can call VALID. MultiStream's verdict
# rests on early stopping's estimate of the p99 per-query latency, which LoadGen refuses below 662 queries
# ("Need to process at least 662 queries for early stopping"); the other scenarios need fewer.
DEFAULT_MIN_QUERIES = {"multi_stream": 662}
DEFAULT_MIN_QUERY_COUNT = 100


def min_queries(serve: Any) -> int:
    """serve.min_query_count, or (null) the scenario's default above."""
    if serve.min_query_count is not None:
        return serve.min_query_count
    return DEFAULT_MIN_QUERIES.get(serve.scenario, DEFAULT_MIN_QUERY_COUNT)


def allowed_batch_sizes(serve: Any) -> list[int]:
    """The batch sizes an inference step runs at, ascending: serve.batch_sizes, or (null) the powers of two
    below serve.max_batch and max_batch itself. A compiling framework (jax.jit, TF XLA, torch.compile)
    compiles once per shape, so a server pads a taken batch up to one of a few sizes (TF Serving's
    allowed_batch_sizes, Triton's preferred batch sizes) instead of compiling every size 1..max_batch."""
    if serve.batch_sizes is not None:
        return sorted(set(serve.batch_sizes))
    sizes, size = [], 1
    while size < serve.max_batch:
        sizes.append(size)
        size *= 2
    return [*sizes, serve.max_batch]


def _batch_sizes_ok(serve: Any) -> bool:
    """An explicit list is positive sizes whose largest is max_batch (a taken batch of max_batch samples
    must fit one size, and no size is ever filled beyond what a step takes)."""
    sizes = serve.batch_sizes
    return sizes is None or (bool(sizes) and min(sizes) >= 1 and max(sizes) == serve.max_batch)


def serve_problems(serve: Any, task: str, dataset: str) -> list[tuple[bool, str]]:
    """(ok, one-line message) pairs for config.validate: an unknown scenario, an impossible bound, count or
    batch size list, a task or dataset this stage cannot serve."""
    s = serve
    return [
        (
            s.scenario in SCENARIOS,
            f"serve.scenario={s.scenario!r}: use one of {', '.join(SCENARIOS)}",
        ),
        (
            task in SERVED_TASKS,
            f"mode=serve: model.task={task} is not served yet (served: {', '.join(SERVED_TASKS)})",
        ),
        (
            dataset == "synthetic",
            f"mode=serve answers synthetic samples only; use dataset=synthetic, not {dataset}",
        ),
        (s.max_batch >= 1, f"serve.max_batch={s.max_batch}: use 1 or more"),
        (
            _batch_sizes_ok(s),
            f"serve.batch_sizes={s.batch_sizes}: list sizes of 1 or more whose largest is "
            f"serve.max_batch={s.max_batch} (or null: the powers of two up to it, and it)",
        ),
        (s.min_duration_s >= 0, f"serve.min_duration_s={s.min_duration_s}: use 0 or more seconds"),
        (
            s.max_duration_s is None or s.max_duration_s >= s.min_duration_s,
            f"serve.max_duration_s={s.max_duration_s} is below serve.min_duration_s={s.min_duration_s}: "
            "the run could never last long enough",
        ),
        (
            s.min_query_count is None or s.min_query_count >= 1,
            f"serve.min_query_count={s.min_query_count}: use 1 or more (or null: the scenario's need)",
        ),
        (
            s.max_query_count is None or s.max_query_count >= min_queries(s),
            f"serve.max_query_count={s.max_query_count} is below the {min_queries(s)} queries "
            f"serve.min_query_count asks for in {s.scenario}",
        ),
        (
            s.target_qps is None or s.target_qps > 0,
            f"serve.target_qps={s.target_qps}: a query rate must be above 0 (or null)",
        ),
        (
            s.latency_bound_ms is None or s.latency_bound_ms > 0,
            f"serve.latency_bound_ms={s.latency_bound_ms}: a latency bound must be above 0 ms (or null)",
        ),
        (
            s.expected_latency_ms is None or s.expected_latency_ms > 0,
            f"serve.expected_latency_ms={s.expected_latency_ms}: must be above 0 ms (or null)",
        ),
        (s.samples_per_query >= 1, f"serve.samples_per_query={s.samples_per_query}: use 1 or more"),
        (s.sample_count >= 1, f"serve.sample_count={s.sample_count}: use 1 or more"),
        (s.seed >= 0, f"serve.seed={s.seed}: use 0 or more"),
        (
            not s.search or s.scenario == "server",
            f"serve.search=true searches Server's peak rate; serve.scenario={s.scenario} has none to search",
        ),
        (
            not s.search or s.search_budget_s >= s.search_step_s > 0,
            f"serve.search_budget_s={s.search_budget_s} must hold at least one trial of "
            f"serve.search_step_s={s.search_step_s} (> 0)",
        ),
    ]
