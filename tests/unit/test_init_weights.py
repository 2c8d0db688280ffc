"""model.init_weights: every framework starts from one file of framework-neutral weights, so the first
step's loss on the same batch (the spec's numpy synthetic batch, seed 0 everywhere) is the same in torch,
TensorFlow, MXNet and JAX. Real workers, one subprocess per framework (JAX's under its own interpreter), on
the CPU. VGG16, which trains through Dropout, is compared by its inference logits instead."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dlbench.config import JobConfig
from dlbench.workloads.classification.small_cnn_plan import SmallCnnSizes, initial_weights
from tests.worker_jobs import framework_pythons, run_snippet, run_worker, worker_env

FRAMEWORKS = ("torch", "tf", "mxnet", "jax")
PYTHONS = framework_pythons(FRAMEWORKS)
SIZES = SmallCnnSizes(image_size=8, channels=1, num_classes=10)
ENV = worker_env(OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")


def _job(framework: str, init: Path | None, model: str = "small_cnn") -> JobConfig:
    # ResNet-50 at 64x64: its last stage is 2x2, so BatchNorm averages 16 numbers per channel (at 32x32, 4:
    # MXNet then drifts 2.6e-4 relative from torch and TF, amplified fp32 rounding, not a mapping error)
    image = {"small_cnn": 8, "resnet50": 64}.get(model, 32)
    sizes = (
        {"image_size": image, "channels": 1} if model == "small_cnn" else {"image_size": image, "depth": 8}
    )
    sizes["num_classes"] = 10
    job = JobConfig.from_dict(
        {
            "framework": {"name": framework},
            "model": {"name": model, "task": "classification", **sizes, "init_weights": init and str(init)},
        }
    )
    s = job.schedule
    s.batch_size, s.warmup_steps, s.steps_per_window, s.windows = 4, 0, 1, 1
    job.mode, job.device, job.threads = "train", "cpu", 1
    return job


def _first_losses(tmp: Path, init: Path | None, model: str = "small_cnn", seed: int = 0) -> dict[str, float]:
    def one(fw: str) -> float:
        job = _job(fw, init, model)
        job.schedule.seed = seed
        name = f"{fw}-{model}-{init is not None}-{seed}-{len(list(tmp.iterdir()))}.json"
        rc, events, err = run_worker(job, tmp / name, ENV, python=PYTHONS[fw])
        assert rc == 0, err[-3000:]
        (window,) = [e for e in events if e.get("event") == "window"]
        return float(window["loss"])

    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores: four workers at once only thrash
        return dict(zip(FRAMEWORKS, pool.map(one, FRAMEWORKS), strict=True))


def test_a_frameworks_own_initialisation_is_the_runs_seed_in_every_mode(tmp_path):
    """Outside mode=converge too, schedule.seed seeds each framework's own draw: a training curve repeats
    run to run, and another seed is another draw (before, PyTorch, TF and MXNet drew unseeded there)."""
    first, again, other = (_first_losses(tmp_path, None, "resnet_cifar", seed=s) for s in (0, 0, 1))
    assert first == again, (first, again)
    assert all(abs(other[fw] - first[fw]) > 1e-6 for fw in FRAMEWORKS), (first, other)
    # the small CNN's initial weights are the seed's numpy draw in every framework, in every mode
    small = _first_losses(tmp_path, None, seed=3)
    assert all(small[fw] == pytest.approx(small["torch"], rel=1e-4) for fw in FRAMEWORKS), small


@pytest.fixture(scope="module")
def weights_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("init") / "small_cnn.npz"
    weights = initial_weights(SIZES, seed=7)
    weights = {k: v + np.float32(0.01) if k.endswith(".bias") else v for k, v in weights.items()}  # not zero
    np.savez(path, **weights)
    return path


CIFAR_WEIGHTS = """
import numpy as np, torch
from dlbench.config import JobConfig
from dlbench.workloads.classification.torch import ClassificationTorch
job = JobConfig.from_dict({"model": {"name": "MODEL", "depth": 8, "image_size": 32, "num_classes": 10}})
torch.manual_seed(11)
family = ClassificationTorch()
model = family.build_model(job.model)
with torch.no_grad():  # BN away from its identity start, so a wrong mapping of gamma/beta shows
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.weight.uniform_(0.5, 1.5); m.bias.uniform_(-0.2, 0.2)
np.savez("PATH", **family.export_weights(model))
print("STATS {}")
"""


def _resnet_weights(tmp: Path, model: str) -> Path:
    path = tmp / f"{model}.npz"
    run_snippet(CIFAR_WEIGHTS.replace("PATH", str(path)).replace("MODEL", model), ENV)
    return path


def test_the_cifar_resnet_from_the_same_weights_gives_the_same_first_loss(tmp_path):
    """The ResNet family's exchange (layers by order and kind, each framework converting its layout)."""
    path = _resnet_weights(tmp_path, "resnet_cifar")
    loaded = _first_losses(tmp_path, path, "resnet_cifar")
    for fw in FRAMEWORKS[1:]:
        assert loaded[fw] == pytest.approx(loaded["torch"], rel=1e-4), loaded
    default = _first_losses(tmp_path, None, "resnet_cifar")  # each framework's own initialisation
    assert all(abs(default[fw] - loaded[fw]) > 1e-3 for fw in FRAMEWORKS[1:]), (default, loaded)


def test_resnet50_from_the_same_weights_gives_the_same_first_loss(tmp_path):
    """ResNet-50 v1.5 at 64x64: its own initialisation differs per framework, one file makes them agree."""
    loaded = _first_losses(tmp_path, _resnet_weights(tmp_path, "resnet50"), "resnet50")
    for fw in FRAMEWORKS[1:]:
        assert loaded[fw] == pytest.approx(loaded["torch"], rel=1e-4), loaded


# VGG16 trains through Dropout, whose masks differ per framework, so its first training loss cannot agree:
# the file's weights are compared by the logits of the inference network (Dropout off) on one numpy batch,
# each framework's family building the model and loading the file, one subprocess per framework. 64x64:
# the last conv map is 2x2, so the 7x7 adaptive pool does not repeat one number per channel and a wrong
# order of the first dense's (C, H, W) inputs changes the logits (at 32x32 a swap of H and W would not).
VGG_BATCH = "x = np.random.default_rng(0).standard_normal((4, 3, 64, 64)).astype(np.float32)  # NCHW"
VGG_JOB = 'job = JobConfig.from_dict({"model": {"name": "vgg16", "image_size": 64, "num_classes": 10}})'
VGG_EXPORT = f"""
import json, numpy as np, torch
from dlbench.config import JobConfig
from dlbench.workloads.classification.torch import ClassificationTorch
{VGG_JOB}
{VGG_BATCH}
torch.manual_seed(11)
family = ClassificationTorch()
model = family.build_model(job.model).eval()
with torch.no_grad():  # biases away from their zero start, so a wrong bias mapping shows
    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            m.bias.uniform_(-0.1, 0.1)
    ref = model(torch.from_numpy(x)).numpy()
weights = family.export_weights(model)
np.savez("PATH", **weights)
with torch.no_grad():  # torch's own load (of what it wrote): from zeros back to the same logits
    for p in model.parameters():
        p.zero_()
family.load_weights(model, weights)
with torch.no_grad():
    again = model(torch.from_numpy(x)).numpy()
print("STATS " + json.dumps({{"torch": ref.tolist(), "torch_loaded": again.tolist()}}))
"""
VGG_LOAD = {
    "tf": """
from dlbench.workloads.classification.tensorflow import ClassificationTF
family = ClassificationTF()
model = family.build_model(job.model)
family.load_weights(model, weights)
logits = model(x.transpose(0, 2, 3, 1), training=False).numpy()
""",
    "mxnet": """
from dlbench.backends.mxnet._compat import mx
from dlbench.workloads.classification.mxnet import ClassificationMXNet
family = ClassificationMXNet()
net = family.build_model(job.model, train=False)
net.initialize(mx.init.Zero(), ctx=mx.cpu())  # the file overwrites every parameter
family.load_weights(net, weights)
logits = net(mx.nd.array(x)).asnumpy()
""",
    "jax": """
import jax, jax.numpy as jnp
from dlbench.backends.jax.family import Network
from dlbench.workloads.classification.jax import ClassificationJax
family = ClassificationJax()
module = family.build_model(job.model, jnp.float32, jnp.float32)
nhwc = jnp.asarray(x.transpose(0, 2, 3, 1))
shapes = jax.eval_shape(module.init, jax.random.PRNGKey(0), nhwc)  # the file overwrites every leaf
net = Network(module, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes))
family.load_weights(net, weights)
logits = np.asarray(module.apply(net.variables, nhwc, train=False))
""",
}


def _vgg_logits(fw: str, path: Path) -> np.ndarray:
    script = (
        f"import json, numpy as np\nfrom dlbench.config import JobConfig\n{VGG_JOB}\n{VGG_BATCH}\n"
        f'with np.load("{path}") as npz:\n    weights = {{k: npz[k] for k in npz.files}}\n'
        f'{VGG_LOAD[fw]}print("STATS " + json.dumps(logits.tolist()))\n'
    )
    return np.array(run_snippet(script, ENV, python=PYTHONS[fw]))


def test_vgg16_from_the_same_weights_gives_the_same_logits_everywhere(tmp_path):
    """VGG16 through the ResNets' exchange: 13 convs with biases, 3 dense layers, the first of which TF
    reads flattened as (H, W, C) and the others as (C, H, W), the neutral order."""
    path = tmp_path / "vgg16.npz"
    torch_side = run_snippet(VGG_EXPORT.replace("PATH", str(path)), ENV)
    ref = np.array(torch_side["torch"])
    assert ref.shape == (4, 10) and ref.std() > 0.05, ref  # not all near zero, where any mapping agrees
    np.testing.assert_array_equal(np.array(torch_side["torch_loaded"]), ref)
    others = FRAMEWORKS[1:]
    with ThreadPoolExecutor(max_workers=2) as pool:  # ~1 GB of weights per process, and two cores
        logits = dict(zip(others, pool.map(lambda fw: _vgg_logits(fw, path), others), strict=True))
    for fw, got in logits.items():
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max(), err_msg=fw)


TRANSFORMER = {"name": "transformer", "task": "translation", "size": "tiny", "vocab": 1000, "batch_size": 4,
               "batch_tokens": 0, "lengths": "fixed", "max_len": 16, "dropout": 0.0}  # fmt: skip
TRANSFORMER_WEIGHTS = f"""
import numpy as np, torch
from dlbench.config import JobConfig
from dlbench.workloads.translation.torch import TranslationTorch
job = JobConfig.from_dict({{"model": {TRANSFORMER!r}}})
torch.manual_seed(5)
family = TranslationTorch()
model = family.build_model(job.model)
with torch.no_grad():  # LayerNorm and biases away from their 1 / 0 start, so a wrong mapping shows
    for name, p in model.named_parameters():
        if p.dim() == 1:
            p.uniform_(0.5, 1.5) if "norm" in name else p.uniform_(-0.1, 0.1)
np.savez("PATH", **family.export_weights(model))
print("STATS {{}}")
"""


def test_the_transformer_from_the_same_weights_gives_the_same_first_loss(tmp_path):
    """The Transformer (dropout 0: no framework's own random masks) from one file: the same label-smoothed
    loss on the spec's synthetic sentence batch in every framework."""
    path = tmp_path / "transformer.npz"
    run_snippet(TRANSFORMER_WEIGHTS.replace("PATH", str(path)), ENV)

    def one(run: tuple[str, str | None]) -> float:
        fw, init = run
        job = JobConfig.from_dict({"framework": {"name": fw}, "model": {**TRANSFORMER, "init_weights": init}})
        s = job.schedule
        s.warmup_steps, s.steps_per_window, s.windows = 0, 1, 1
        job.mode, job.device, job.threads = "train", "cpu", 1
        rc, events, err = run_worker(job, tmp_path / f"{fw}-{init is None}.json", ENV, python=PYTHONS[fw])
        assert rc == 0, err[-3000:]
        (window,) = [e for e in events if e.get("event") == "window"]
        return float(window["loss"])

    runs = [(fw, str(path)) for fw in FRAMEWORKS] + [("torch", None), ("tf", None)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        losses = list(pool.map(one, runs))
    loaded, own = dict(zip(FRAMEWORKS, losses[:4], strict=True)), losses[4:]
    for fw in FRAMEWORKS[1:]:
        assert loaded[fw] == pytest.approx(loaded["torch"], rel=1e-4), loaded
    # the file, not a loss every small initialisation gives (about ln(vocab)), is what agrees
    assert abs(own[0] - own[1]) > 1e-3 and abs(own[0] - loaded["torch"]) > 1e-3, (own, loaded)


def test_one_step_from_the_same_weights_gives_the_same_loss_everywhere(weights_file, tmp_path):
    loaded = _first_losses(tmp_path, weights_file)
    for fw in FRAMEWORKS[1:]:
        assert loaded[fw] == pytest.approx(loaded["torch"], rel=1e-4), loaded
    default = _first_losses(tmp_path, None)  # the seed-0 weights every framework builds by itself
    assert abs(default["torch"] - loaded["torch"]) > 1e-3  # the file, not the default, was used


class _NoExchange:
    """A family whose export_weights/load_weights are the framework bases' (they raise NotImplementedError)."""

    def load_weights(self, model, weights):
        raise NotImplementedError("_NoExchange.load_weights")


def test_a_model_without_an_exchange_is_one_line(weights_file):
    """Every model now has an exchange in every framework, so the bench's line for one without is checked on
    the shared skeleton with a family that has none, in this process (no framework is imported)."""
    from dlbench.backends.skeleton import SpecBench
    from dlbench.errors import ConfigError

    bench = SpecBench(_job("torch", weights_file, "vgg16"))
    bench.family = _NoExchange()
    with pytest.raises(ConfigError, match="model=vgg16 has no framework-neutral weight exchange in torch"):
        bench.seed_weights(model=None)


def test_a_file_that_does_not_fit_is_one_line(weights_file, tmp_path):
    # VGG16 given the small CNN's weights: its exchange (not a missing one) refuses them, in a real worker
    rc, events, err = run_worker(_job("torch", weights_file, "vgg16"), tmp_path / "vgg.json", ENV)
    text = " ".join(str(e.get("message", "")) for e in events) + err
    assert rc != 0 and "cannot load it (ValueError: the weights do not fit this network" in text, text[-2000:]
    bad = tmp_path / "wrong.npz"
    np.savez(bad, nothing=np.zeros(3, np.float32))
    rc, events, err = run_worker(_job("tf", bad), tmp_path / "bad.json", ENV)
    text = " ".join(str(e.get("message", "")) for e in events) + err
    assert rc != 0 and f"model.init_weights={bad}: cannot load it" in text


def test_a_missing_file_is_refused_before_a_worker_starts(tmp_path):
    from dlbench.config import validate
    from dlbench.errors import ConfigError

    with pytest.raises(ConfigError, match="model.init_weights=.*: no such file"):
        validate(_job("torch", tmp_path / "absent.npz"))
