"""The accuracy mode's small CNN is one network in every framework: equal parameters and FLOPs (each
counted by the backend's `model_stats`, with the framework's own tools, through the classification
registry), and, given the same canonical weights, the same logits.

Each framework runs in its own subprocess (frameworks never share a process), side by side with one
compute thread each. The weights are drawn here with numpy and handed over as an .npz file; every
subprocess first builds its network from another seed, so equal logits prove that loading worked.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from dlbench.data.seeds import stream
from dlbench.workloads.classification.small_cnn_plan import SmallCnnSizes, check_weights, initial_weights
from tests.worker_jobs import framework_pythons, run_snippet, worker_env

FRAMEWORKS = {"torch": "torch", "tf": "tensorflow", "mxnet": "mxnet", "jax": "jax"}
SIZES = (28, 8)  # Fashion-MNIST and digits
SEED = 7

COMMON = """
import json, os
import numpy as np
weights = dict(np.load(os.environ["SMALL_CNN_WEIGHTS"]))
images = np.load(os.environ["SMALL_CNN_IMAGES"])
seed = int(os.environ["SMALL_CNN_SEED"])
out = {}
from dlbench.workloads.classification.spec import ClassificationConfig

def cfg(size):
    return ClassificationConfig(name="small_cnn", image_size=size, channels=1, num_classes=10)
"""
TORCH = """
import torch
from dlbench.backends.torch.stats import model_stats
from dlbench.workloads.classification.torch_small_cnn import build_small_cnn, export_weights, load_weights
for size in (28, 8):
    out[size] = model_stats(cfg(size))
m = build_small_cnn(seed=1).eval()
load_weights(m, weights)
with torch.no_grad():
    out["logits"] = m(torch.from_numpy(images[:, None])).numpy().tolist()
    out["seeded"] = build_small_cnn(seed=seed).eval()(torch.from_numpy(images[:, None])).numpy().tolist()
out["roundtrip"] = all(np.array_equal(v, weights[k]) for k, v in export_weights(m).items())
"""
TF = """
from dlbench.backends.tensorflow.stats import model_stats
from dlbench.workloads.classification.tensorflow_small_cnn import build_small_cnn, export_weights, load_weights
for size in (28, 8):
    out[size] = {k: v for k, v in model_stats(cfg(size)).items() if k in ("params", "gflops")}
m = build_small_cnn(seed=1)
load_weights(m, weights)
out["logits"] = np.asarray(m(images[..., None], training=False)).tolist()
out["seeded"] = np.asarray(build_small_cnn(seed=seed)(images[..., None], training=False)).tolist()
out["roundtrip"] = all(np.array_equal(v, weights[k]) for k, v in export_weights(m).items())
"""
MXNET = """
from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.stats import model_stats
from dlbench.workloads.classification.mxnet_small_cnn import build_small_cnn, export_weights, load_weights
for size in (28, 8):
    out[size] = model_stats(cfg(size))
m = build_small_cnn(seed=1)
m.hybridize()
load_weights(m, weights)
out["logits"] = m(mx.nd.array(images[:, None])).asnumpy().tolist()
out["seeded"] = build_small_cnn(seed=seed)(mx.nd.array(images[:, None])).asnumpy().tolist()
out["roundtrip"] = all(np.array_equal(v, weights[k]) for k, v in export_weights(m).items())
"""
JAX = """
import jax
from dlbench.backends.jax.family import Network
from dlbench.backends.jax.stats import model_stats
from dlbench.workloads.classification.jax import ClassificationJax
from dlbench.workloads.classification.jax_small_cnn import export_weights, load_seed, load_weights
for size in (28, 8):
    out[size] = {k: v for k, v in model_stats(cfg(size)).items() if k in ("params", "gflops")}

def built(seed):
    module = ClassificationJax().build_model(cfg(28), jax.numpy.float32, jax.numpy.float32)
    net = Network(module)
    load_seed(net, seed)
    return net

def logits(net):
    return np.asarray(net.module.apply(net.variables, images[..., None], train=False)).tolist()

m = built(1)
load_weights(m, weights)
out["logits"] = logits(m)
out["seeded"] = logits(built(seed))
out["roundtrip"] = all(np.array_equal(v, weights[k]) for k, v in export_weights(m).items())
"""
SNIPPETS = {"torch": TORCH, "tf": TF, "mxnet": MXNET, "jax": JAX}
THREADS = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("small_cnn")
    weights, images = tmp / "weights.npz", tmp / "images.npy"
    np.savez(weights, **initial_weights(SmallCnnSizes(), SEED))
    np.save(images, stream(0, "order").standard_normal((6, 28, 28)).astype(np.float32))
    pythons = framework_pythons(FRAMEWORKS)
    installed = list(pythons)
    env = worker_env(
        **THREADS, SMALL_CNN_WEIGHTS=str(weights), SMALL_CNN_IMAGES=str(images), SMALL_CNN_SEED=str(SEED)
    )

    def ask(fw: str) -> dict:
        script = COMMON + SNIPPETS[fw] + 'print("STATS " + json.dumps(out))\n'
        return run_snippet(script, env, python=pythons[fw])

    with ThreadPoolExecutor(max_workers=len(installed)) as pool:
        found = dict(zip(installed, pool.map(ask, installed), strict=True))
    if len(found) < 2:
        pytest.skip(f"needs two frameworks to compare, found {installed}")
    return found


@pytest.mark.parametrize("size", SIZES)
def test_parameters_equal_and_flops_within_2_percent(results: dict, size: int) -> None:
    sizes = SmallCnnSizes(image_size=size)
    params = {fw: r[str(size)]["params"] for fw, r in results.items()}
    flops = {fw: round(r[str(size)]["gflops"] * 1e9) for fw, r in results.items()}
    assert set(params.values()) == {sizes.params()}, params
    assert max(flops.values()) <= 1.02 * min(flops.values()), flops
    assert flops.get("torch", sizes.flops()) == sizes.flops(), (
        "torch's counter disagrees with the plan's formula"
    )


def test_same_weights_give_the_same_logits_in_every_framework(results: dict) -> None:
    logits = {fw: np.array(r["logits"]) for fw, r in results.items()}
    reference = next(iter(logits.values()))
    assert reference.shape == (6, 10) and np.abs(reference).max() > 1e-3
    for fw, out in logits.items():
        np.testing.assert_allclose(out, reference, atol=1e-5, err_msg=fw)


def test_a_seed_gives_the_same_initial_network_everywhere(results: dict) -> None:
    """build_small_cnn(seed=s) draws initial_weights(s): equal to the loaded weights of seed s."""
    for fw, r in results.items():
        np.testing.assert_allclose(np.array(r["seeded"]), np.array(r["logits"]), atol=1e-5, err_msg=fw)


def test_weights_round_trip_through_each_framework_layout(results: dict) -> None:
    assert {fw: r["roundtrip"] for fw, r in results.items()} == dict.fromkeys(results, True)


def test_initial_weights_scheme_and_shape_check() -> None:
    sizes = SmallCnnSizes()
    a, b = initial_weights(sizes, 3), initial_weights(sizes, 3)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["conv1.weight"], initial_weights(sizes, 4)["conv1.weight"])
    bound = 1 / np.sqrt(32 * 9)  # conv2: fan_in = 32 channels x 3 x 3
    assert 0.9 * bound < np.abs(a["conv2.weight"]).max() <= bound
    assert not a["fc1.bias"].any()
    a["fc1.weight"] = a["fc1.weight"][:, :-1]
    with pytest.raises(ValueError, match=r"fc1.weight has shape \(128, 3135\), expected \(128, 3136\)"):
        check_weights(sizes, a)
    with pytest.raises(ValueError, match="image_size=3"):
        SmallCnnSizes(image_size=3)
