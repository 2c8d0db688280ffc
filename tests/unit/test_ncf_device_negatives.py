"""NCF's mode=train step draws its negatives on the device, as DLE's training loop does: each framework's
`add_negatives` turns a batch of positives into positives + 4 random items per positive with 0/1 labels,
fresh on every call; the synthetic source feeds a pool of distinct positive batches, and a step trains
on (and counts) positives + negatives. Each framework runs in its own subprocess, all at once."""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dlbench.workloads.recommendation.spec import (
    SYNTHETIC_POOL,
    RecommendationConfig,
    positives_per_step,
    spec,
)
from tests.worker_jobs import framework_pythons, run_snippet, worker_env

FRAMEWORKS = ("torch", "tf", "mxnet", "jax")
PYTHONS = framework_pythons(FRAMEWORKS)  # JAX's worker has its own environment
SCRIPTS = Path(__file__).resolve().parents[2] / "yardsticks"
USERS, ITEMS, NEGATIVES = 50, 1000, 4
POSITIVES = {"users": [3, 7, 7, 49, 0, 12], "items": [5, 5, 999, 0, 17, 400]}

# per framework: `tensors(users, items)` -> the framework's int32 tensors; `numpy(x)` -> numpy; `traced(fn)`:
# fn as the bench's step runs it (TensorFlow: inside a tf.function, where the draw must stay fresh per call)
ADAPTERS = {
    "torch": """
        import torch
        from dlbench.workloads.recommendation import torch as rec
        def tensors(u, i): return torch.tensor(u, dtype=torch.int32), torch.tensor(i, dtype=torch.int32)
        def numpy(x): return x.numpy()
        def traced(fn): return fn
    """,
    "tf": """
        import tensorflow as tf
        from dlbench.workloads.recommendation import tensorflow as rec
        def tensors(u, i): return tf.constant(u, tf.int32), tf.constant(i, tf.int32)
        def numpy(x): return x.numpy()
        def traced(fn): return tf.function(fn)
    """,
    "mxnet": """
        from dlbench.backends.mxnet._compat import mx
        from dlbench.workloads.recommendation import mxnet as rec
        def tensors(u, i): return mx.nd.array(u, dtype="int32"), mx.nd.array(i, dtype="int32")
        def numpy(x): return x.asnumpy()
        def traced(fn): return fn
    """,
    "jax": """
        import jax
        import jax.numpy as jnp
        import numpy as np
        from dlbench.workloads.recommendation import jax as jax_rec
        keys = iter(jax.random.split(jax.random.key(0), 4))  # the bench splits a fresh key every step
        class rec:
            def add_negatives(inputs, spec):
                return jax_rec.add_negatives(inputs, spec, next(keys))
        def tensors(u, i): return jnp.asarray(u, jnp.int32), jnp.asarray(i, jnp.int32)
        def numpy(x): return np.asarray(x)
        def traced(fn): return fn
    """,
}

BODY = """
    import json
    from dlbench.backends.base import load_backend
    from dlbench.config import JobConfig
    from dlbench.workloads.recommendation.spec import RecommendationConfig, spec
    cfg = RecommendationConfig(num_users=USERS, num_items=ITEMS, factors=4, mlp_layers=[8, 4], negatives=NEGATIVES)
    out = {"draws": []}
    draw = traced(lambda users, items: rec.add_negatives((users, items), spec(cfg)))
    for _ in range(2):
        (users, items), (labels,) = draw(*tensors(POSITIVES["users"], POSITIVES["items"]))
        out["draws"].append({"users": numpy(users).tolist(), "items": numpy(items).tolist(),
                             "labels": numpy(labels).tolist(), "dtype": str(numpy(labels).dtype)})
    # the bench: a synthetic train job cycles its pool of positive batches, counting positives + negatives
    job = JobConfig.from_dict({"model": {**cfg.__dict__, "batch_size": 20}, "framework": {"name": FRAMEWORK}})
    job.mode, job.device = "train", "cpu"
    bench = load_backend(FRAMEWORK).build(job)
    seen = []
    for _ in range(POOL + 1):
        batch = bench.source.source.batches[bench.source.source.at]
        seen.append(numpy(batch.inputs[0]).tolist())
        bench.step()
    bench.sync()
    out |= {"units": bench.units(), "loss": bench.loss(), "seen": seen, "targets": len(batch.targets),
            "fact": bench.run_facts().get("negatives")}
    bench.close()
    print("STATS " + json.dumps(out))
"""


def _run(framework: str) -> dict:
    consts = dict(USERS=USERS, ITEMS=ITEMS, NEGATIVES=NEGATIVES, POSITIVES=POSITIVES, POOL=SYNTHETIC_POOL)
    script = textwrap.dedent(ADAPTERS[framework]) + f"FRAMEWORK = {framework!r}\n"
    script += "".join(f"{k} = {v!r}\n" for k, v in consts.items()) + textwrap.dedent(BODY)
    env = worker_env(OMP_NUM_THREADS="1", TF_NUM_INTEROP_THREADS="1", TF_NUM_INTRAOP_THREADS="1",
                     MXNET_CPU_WORKER_NTHREADS="1", TF_CPP_MIN_LOG_LEVEL="3")  # fmt: skip
    return run_snippet(script, env, python=PYTHONS[framework])


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    with ThreadPoolExecutor(max_workers=len(FRAMEWORKS)) as pool:
        futures = {fw: pool.submit(_run, fw) for fw in PYTHONS}
        return {fw: f.result() for fw, f in futures.items()}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_positive_gets_four_uniform_negatives_drawn_on_the_device(results, framework):
    n = len(POSITIVES["users"])
    first, second = results[framework]["draws"]
    for draw in (first, second):
        assert draw["users"] == POSITIVES["users"] * (1 + NEGATIVES)  # the positive's user, repeated
        assert draw["items"][:n] == POSITIVES["items"]
        assert all(0 <= i < ITEMS for i in draw["items"][n:])
        assert draw["labels"] == [1.0] * n + [0.0] * (NEGATIVES * n) and draw["dtype"] == "float32"
    assert first["items"][n:] != second["items"][n:]  # fresh negatives on every call (TF: of one trace)
    assert len(set(first["items"][n:] + second["items"][n:])) > 30  # spread over the items


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_synthetic_train_step_cycles_fresh_positives_and_counts_the_negatives(results, framework):
    r = results[framework]
    positives = positives_per_step(20, NEGATIVES)
    assert r["targets"] == 0  # the batch holds positives only: the step makes the labels
    assert all(len(users) == positives for users in r["seen"])
    assert len({tuple(users) for users in r["seen"][:SYNTHETIC_POOL]}) == SYNTHETIC_POOL  # distinct batches
    assert r["seen"][SYNTHETIC_POOL] == r["seen"][0]  # then the pool starts over
    assert r["units"] == (SYNTHETIC_POOL + 1) * positives * (1 + NEGATIVES)
    assert isinstance(r["loss"], float) and np.isfinite(r["loss"])
    assert r["fact"].startswith(f"{NEGATIVES} per positive, on the device")  # tag run.negatives


def test_the_synthetic_pool_is_popularity_skewed_and_the_same_everywhere():
    s = spec(RecommendationConfig(num_users=1000, num_items=500))
    pool = s.synthetic_pool(5000, True)
    again = s.synthetic_pool(5000, True)
    assert len(pool) == SYNTHETIC_POOL and all(b.units == 1000 * 5 and b.targets == {} for b in pool)
    np.testing.assert_array_equal(pool[3].inputs["item"], again[3].inputs["item"])  # numpy, seed 0
    items = np.concatenate([b.inputs["item"] for b in pool])
    counts = np.sort(np.bincount(items, minlength=500))[::-1]
    assert counts[:50].sum() > 0.35 * len(items)  # the top 10% of items hold far more than 10% of rows
    infer = s.synthetic_pool(300, False)
    assert all(len(b.inputs["user"]) == 300 and b.units == 300 for b in infer)


def test_the_yardstick_cycles_the_very_ids_of_the_harness():
    """yardsticks/bare_ncf.py draws its pool with its own copy of the numpy code: the same ids, so the
    yardstick and the harness look up the same embedding rows (locality is part of the work)."""
    script = textwrap.dedent(f"""
        import argparse, json, sys
        sys.path.insert(0, {str(SCRIPTS)!r})
        from bare_ncf import id_pool
        a = argparse.Namespace(users=300, items=200, pool={SYNTHETIC_POOL})
        print("STATS " + json.dumps([[u.tolist(), i.tolist()] for u, i in id_pool(a, 40)]))
    """)
    bare = run_snippet(script, worker_env(OMP_NUM_THREADS="1"))
    harness = spec(RecommendationConfig(num_users=300, num_items=200)).synthetic_pool(200, True)
    assert len(bare) == len(harness) == SYNTHETIC_POOL
    for (users, items), batch in zip(bare, harness, strict=True):
        assert users == batch.inputs["user"].tolist() and items == batch.inputs["item"].tolist()
