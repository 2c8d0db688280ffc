"""NeuMF is the same network in torch, Keras, Gluon and Flax: equal parameters (31,832,577 at MovieLens-20M
sizes), DLE's initialisation scheme in each, and, given identical weights, identical logits and loss.

Each framework runs in its own subprocess (frameworks never share a process); the three run at once.
"""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dlbench.workloads.recommendation.layout import weight_shapes
from tests.worker_jobs import framework_pythons, run_snippet, worker_env

FRAMEWORKS = ("torch", "tf", "mxnet", "jax")
PYTHONS = framework_pythons(FRAMEWORKS)  # JAX's worker has its own environment
TINY = {"num_users": 7, "num_items": 11, "factors": 4, "mlp_layers": [8, 6, 4]}

# per framework: import the module as `rec` and make_loss; define build(cfg), count(model),
# forward(model, users, items) -> numpy logits, loss(logits numpy, labels numpy) -> float (mean) and
# sgd_step(model, users, items, labels) (lr 1); the BODY defines LOSS and uses CASE (an .npz) and TINY
ADAPTERS = {
    "torch": """
        import torch
        from dlbench.backends.torch.losses import make_loss
        from dlbench.workloads.recommendation import torch as rec
        torch.manual_seed(0)
        def build(cfg): return rec.build_model(cfg)
        def count(m): return sum(p.numel() for p in m.parameters())
        def forward(m, u, i):
            with torch.no_grad(): return m(torch.from_numpy(u), torch.from_numpy(i)).numpy()
        def loss(x, y): return float(LOSS(torch.from_numpy(x), torch.from_numpy(y)))
        def sgd_step(m, u, i, y):
            m.zero_grad()
            LOSS(m(torch.from_numpy(u), torch.from_numpy(i)), torch.from_numpy(y)).backward()
            with torch.no_grad():
                for p in m.parameters(): p -= p.grad
    """,
    "tf": """
        import keras
        import tensorflow as tf
        from dlbench.backends.tensorflow.losses import make_loss
        from dlbench.workloads.recommendation import tensorflow as rec
        keras.utils.set_random_seed(0)
        def build(cfg): return rec.build_model(cfg)
        def count(m): return m.count_params()
        def forward(m, u, i): return keras.ops.convert_to_numpy(m([u.astype("int32"), i.astype("int32")]))
        def loss(x, y): return float(LOSS(tf.constant(x), tf.constant(y)))
        def sgd_step(m, u, i, y):
            with tf.GradientTape() as tape:
                value = LOSS(m([u.astype("int32"), i.astype("int32")]), tf.constant(y))
            for v, g in zip(m.trainable_variables, tape.gradient(value, m.trainable_variables)):
                v.assign_sub(tf.convert_to_tensor(g))
    """,
    "mxnet": """
        from dlbench.backends.mxnet._compat import mx
        from dlbench.backends.mxnet.losses import make_loss
        from dlbench.workloads.recommendation import mxnet as rec
        mx.random.seed(0)
        def build(cfg):
            net = rec.build_model(cfg)
            rec.initialize(net, cfg, mx.cpu())
            net.hybridize()
            return net
        def count(m): return sum(p.data().size for p in m.collect_params().values())
        def ids(a): return mx.nd.array(a, dtype="int32")
        def forward(m, u, i): return m(ids(u), ids(i)).asnumpy()
        def loss(x, y): return float(LOSS(mx.nd.array(x), mx.nd.array(y)).mean().asscalar())
        def sgd_step(m, u, i, y):
            with mx.autograd.record():
                value = LOSS(m(ids(u), ids(i)), mx.nd.array(y)).mean()
            value.backward()
            for p in m.collect_params().values(): p.set_data(p.data() - p.grad())
    """,
}

ADAPTERS["jax"] = """
        import jax
        import jax.numpy as jnp
        from dlbench.backends.jax.family import Network
        from dlbench.backends.jax.losses import make_loss
        from dlbench.workloads.recommendation import jax as rec
        def build(cfg):
            module = rec.build_model(cfg)
            ids = jnp.zeros((1,), jnp.int32)
            return Network(module, dict(jax.jit(module.init)(jax.random.key(0), ids, ids)))
        def count(m): return sum(p.size for p in jax.tree.leaves(m.params))
        def ids(a): return jnp.asarray(a, jnp.int32)
        def forward(m, u, i): return np.asarray(m.module.apply(m.variables, ids(u), ids(i)))
        def loss(x, y): return float(LOSS(jnp.asarray(x), jnp.asarray(y)))
        def sgd_step(m, u, i, y):
            grads = jax.grad(lambda p: LOSS(m.module.apply({"params": p}, ids(u), ids(i)), jnp.asarray(y)))(m.params)
            m.variables = {"params": jax.tree.map(lambda p, g: p - g, m.params, grads)}
"""

BODY = """
    import json
    import numpy as np
    from dlbench.workloads.recommendation.spec import RecommendationConfig, spec
    out = {}
    LOSS = make_loss(spec(RecommendationConfig()))  # the task's loss kind, as the bench makes it
    # parameter counts with the framework's own tool, at MovieLens-20M (the default) and -100K sizes
    out["params_20m"] = count(build(RecommendationConfig()))
    big = build(RecommendationConfig(num_users=943, num_items=1682))
    out["params_100k"] = count(big)
    # the initialisation scheme, read back through the neutral names
    w = rec.export_weights(big)
    out["init"] = {k: [float(v.mean()), float(v.std()), float(np.abs(v).max())] for k, v in w.items()}
    # identical weights -> identical outputs
    case = np.load(CASE)
    weights = {k.replace("/", "."): case[k] for k in case.files if "/" in k}
    tiny = build(RecommendationConfig(**TINY))
    rec.load_weights(tiny, weights)
    back = rec.export_weights(tiny)
    out["roundtrip"] = max(float(np.abs(back[k] - weights[k]).max()) for k in weights)
    logits = forward(tiny, case["users"], case["items"])
    out["logits"] = logits.reshape(-1).tolist()
    out["logits_shape"] = list(logits.shape)
    out["loss"] = loss(logits.astype(np.float32), case["labels"])
    out["loss_extreme"] = loss(case["extreme"], case["extreme_labels"])
    # one plain SGD step with lr 1: the weight change is minus the gradient, read through neutral names
    sgd_step(tiny, case["users"], case["items"], case["labels"])
    out["grads"] = {k: (weights[k] - v).tolist() for k, v in rec.export_weights(tiny).items()}
    try:
        rec.load_weights(tiny, {k: v for k, v in weights.items() if k != "final.bias"})
        out["missing"] = "accepted"
    except ValueError as exc:
        out["missing"] = str(exc)
    print("STATS " + json.dumps(out))
"""


def _reference(w: dict[str, np.ndarray], users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """NeuMF's forward in float64 numpy: the definition the three frameworks must agree with."""
    gmf = w["mf_user.embedding"][users] * w["mf_item.embedding"][items]
    x = np.concatenate([w["mlp_user.embedding"][users], w["mlp_item.embedding"][items]], axis=1)
    i = 0
    while f"mlp{i}.kernel" in w:
        x = np.maximum(x @ w[f"mlp{i}.kernel"] + w[f"mlp{i}.bias"], 0.0)
        i += 1
    return np.concatenate([gmf, x], axis=1) @ w["final.kernel"] + w["final.bias"]


def _stable_bce(x: np.ndarray, y: np.ndarray) -> float:
    x = x.astype(np.float64).reshape(-1)
    return float(np.mean(np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))))


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> dict:
    """Random weights large enough for non-trivial outputs, ids, labels, and logits far outside
    float32's exp range for the numerically safe loss."""
    rng = np.random.default_rng(1)
    shapes = weight_shapes(TINY["num_users"], TINY["num_items"], TINY["factors"], TINY["mlp_layers"])
    weights = {k: rng.normal(0, 0.7, size=s).astype(np.float32) for k, s in shapes.items()}
    arrays = {
        "users": rng.integers(0, TINY["num_users"], 32).astype(np.int64),
        "items": rng.integers(0, TINY["num_items"], 32).astype(np.int64),
        "labels": rng.integers(0, 2, 32).astype(np.float32),
        "extreme": np.array([[-500.0], [500.0], [120.0], [-120.0]], dtype=np.float32),
        "extreme_labels": np.array([1.0, 0.0, 0.0, 1.0], dtype=np.float32),
    }
    path = tmp_path_factory.mktemp("neumf") / "case.npz"
    np.savez(path, **arrays, **{k.replace(".", "/"): v for k, v in weights.items()})
    return {"path": path, "weights": weights, **arrays}


def _run(framework: str, case_path: Path) -> dict:
    script = textwrap.dedent(ADAPTERS[framework]) + f"CASE = {str(case_path)!r}\nTINY = {TINY!r}\n"
    env = worker_env(OMP_NUM_THREADS="1", TF_NUM_INTEROP_THREADS="1", TF_NUM_INTRAOP_THREADS="1",
                     MXNET_CPU_WORKER_NTHREADS="1", TF_CPP_MIN_LOG_LEVEL="3")  # fmt: skip
    return run_snippet(script + textwrap.dedent(BODY), env, python=PYTHONS[framework])


@pytest.fixture(scope="module")
def results(case) -> dict[str, dict]:
    with ThreadPoolExecutor(max_workers=len(FRAMEWORKS)) as pool:
        futures = {fw: pool.submit(_run, fw, case["path"]) for fw in PYTHONS}
        return {fw: f.result() for fw, f in futures.items()}


def test_layout_counts_the_published_sizes():
    def count(users: int, items: int) -> int:
        return sum(int(np.prod(shape)) for shape in weight_shapes(users, items).values())

    assert count(138_493, 26_744) == 31_832_577
    assert count(943, 1_682) == 611_073


def test_layout_rejects_an_odd_first_mlp_width():
    with pytest.raises(ValueError, match="even first width"):
        weight_shapes(10, 10, 4, [7, 4])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_parameter_parity(results, framework):
    assert results[framework]["params_20m"] == 31_832_577
    assert results[framework]["params_100k"] == 611_073


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_initialisation_follows_dle(results, framework):
    init = results[framework]["init"]
    for name in ("mf_user", "mf_item", "mlp_user", "mlp_item"):
        mean, std, _ = init[f"{name}.embedding"]
        assert abs(mean) < 1e-3 and 0.0095 < std < 0.0105, (name, mean, std)
    for name, fan_in, fan_out in (("mlp0", 256, 256), ("mlp1", 256, 128), ("mlp2", 128, 64)):
        glorot = np.sqrt(6.0 / (fan_in + fan_out))
        _, std, peak = init[f"{name}.kernel"]
        assert peak <= glorot and abs(std - glorot / np.sqrt(3)) < 0.05 * glorot, (name, std, glorot)
        assert init[f"{name}.bias"][2] <= 1.0 / np.sqrt(fan_in)
        assert init[f"{name}.bias"][1] > 0.2 / np.sqrt(fan_in)  # torch's default bias init, not zeros
    lecun = np.sqrt(3.0 / 128)
    _, std, peak = init["final.kernel"]
    assert peak <= lecun and abs(std - lecun / np.sqrt(3)) < 0.15 * lecun


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_identical_weights_give_the_reference_outputs(results, case, framework):
    got = results[framework]
    assert got["roundtrip"] == 0.0
    expected = _reference(
        {k: v.astype(np.float64) for k, v in case["weights"].items()}, case["users"], case["items"]
    )
    assert got["logits_shape"] == [32, 1]
    assert np.std(expected) > 0.5  # the case is not degenerate
    np.testing.assert_allclose(got["logits"], expected.reshape(-1), rtol=1e-5, atol=1e-5)
    assert got["loss"] == pytest.approx(_stable_bce(expected, case["labels"]), rel=1e-5)


def test_frameworks_agree_with_each_other(results):
    torch_logits = np.array(results["torch"]["logits"])
    for fw in [f for f in results if f != "torch"]:
        np.testing.assert_allclose(results[fw]["logits"], torch_logits, rtol=1e-5, atol=1e-5)
        assert results[fw]["loss"] == pytest.approx(results["torch"]["loss"], rel=1e-6)


def test_gradients_agree_across_frameworks(results):
    reference = results["torch"]["grads"]
    assert max(np.abs(g).max() for g in map(np.array, reference.values())) > 1e-3  # something was learned
    assert np.abs(np.array(reference["mf_user.embedding"])).sum() > 0  # embeddings get gradients
    for fw in [f for f in results if f != "torch"]:
        assert set(results[fw]["grads"]) == set(reference)
        for name, grad in reference.items():
            np.testing.assert_allclose(results[fw]["grads"][name], grad, atol=2e-6, err_msg=f"{fw} {name}")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_loss_is_the_numerically_safe_form(results, case, framework):
    # every label is wrong, by |x| >= 120: a naive log(sigmoid(x)) gives inf in float32, the safe form |x|
    expected = _stable_bce(case["extreme"], case["extreme_labels"])
    assert expected == pytest.approx((500 + 500 + 120 + 120) / 4, rel=1e-6)
    assert results[framework]["loss_extreme"] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_weights_that_do_not_fit_are_refused_in_one_message(results, framework):
    assert results[framework]["missing"].startswith(
        "NeuMF weights do not fit the network: missing final.bias"
    )
