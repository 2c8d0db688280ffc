"""SSD300's inference variants through each framework's bench (one subprocess each): model.postprocess=true
adds decoding + NMS to the timed step, false times the forward pass only, as DLE does."""

from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.worker_jobs import run_snippet, worker_env

FRAMEWORKS = [
    fw
    for fw, mod in (("torch", "torch"), ("tf", "tensorflow"), ("mxnet", "mxnet"))
    if importlib.util.find_spec(mod)
]

SCRIPT = """
import json, sys
import numpy as np
from dlbench.backends.base import load_backend
from dlbench.config import JobConfig
framework = sys.argv[1]
backend = load_backend(framework)
out = {}
for post in (False, True):
    job = JobConfig.from_dict({"framework": {"name": framework},
                               "model": {"name": "ssd300", "task": "detection", "image_size": 64,
                                         "batch_size": 2, "postprocess": post}})
    job.mode, job.device = "infer", "cpu"
    bench = backend.build(job)
    try:
        for _ in range(2):
            bench.step()
        bench.sync()
        model = getattr(bench, "model", None) or getattr(bench, "net", None)
        result = bench.family.infer(model, bench.source.next().inputs)
        arrays = [r.asnumpy() if hasattr(r, "asnumpy") else r.detach() if hasattr(r, "detach") else r for r in result]
        shapes = [list(np.asarray(a).shape) for a in arrays]
        out[str(post)] = {"units": bench.units(), "shapes": shapes, "loss": bench.loss()}
    finally:
        bench.close()
print("STATS " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results() -> dict:
    env = worker_env(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2")
    with ThreadPoolExecutor(max_workers=len(FRAMEWORKS)) as pool:
        futures = {
            fw: pool.submit(run_snippet, f"import sys; sys.argv = ['x', {fw!r}]\n" + SCRIPT, env, timeout=900)
            for fw in FRAMEWORKS
        }
        return {fw: f.result() for fw, f in futures.items()}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_inference_is_the_forward_pass_or_adds_nms(results: dict, framework: str):
    plain, post = results[framework]["False"], results[framework]["True"]
    anchors = 390  # default boxes of the maps a 64x64 input makes
    assert plain["shapes"] == [[2, 4, anchors], [2, 81, anchors]]
    assert post["shapes"] == [[2, 200, 4], [2, 200], [2, 200]]  # boxes, scores, labels (0 = empty slot)
    for r in (plain, post):
        assert r["units"] == 3 * 2 and r["loss"] is None  # 2 timed steps + the call above, in images
