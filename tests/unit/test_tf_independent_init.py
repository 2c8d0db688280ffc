"""Every randomly initialised weight of dlbench's TensorFlow networks (and of the TF yardsticks) is its own
draw: no two weights start with the same numbers. Keras 3 initializer instances keep the seed they drew when
made, so one instance shared by several layers gives each layer of one shape the same numbers (all 3x3
convs of a ResNet stage identical) and layers of other shapes the same leading numbers (NCF's tables): a
start that trains unlike torch's and JAX's independent draws.

TensorFlow runs in a subprocess, as in test_backend_tf.py (TF and torch's triton must not share a process).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed in this interpreter", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
import numpy as np
import keras
sys.path.insert(0, sys.argv[1])
keras.utils.set_random_seed(0)
keras.mixed_precision.set_global_policy("float32")

def duplicates(model):
    # weights whose start is random (more than one distinct value) and whose first values equal another's:
    # one shared instance draws the same numbers for each layer of one shape, and the same leading numbers
    # for layers of other shapes (a stateless draw from one seed)
    seen, dup = {}, []
    for v in model.weights:
        w = np.asarray(v)
        if np.unique(w).size < 2:
            continue  # a constant start (zeros, ones) is the same in every framework
        key = w.ravel()[:64].tobytes()
        if key in seen:
            dup.append([seen[key], v.path])
        else:
            seen[key] = v.path
    return dup

from dlbench.workloads.classification.spec import ClassificationConfig
from dlbench.workloads.classification.tensorflow import build_model as classifier
from dlbench.workloads.detection.spec import DetectionConfig
from dlbench.workloads.detection.tensorflow import build_model as detector
from dlbench.workloads.recommendation.spec import RecommendationConfig, table_sizes
from dlbench.workloads.recommendation.tensorflow import build_model as recommender
from dlbench.workloads.translation.tensorflow import build_transformer
from dlbench.workloads.translation.transformer import SIZES

models = {
    "resnet50": lambda: classifier(ClassificationConfig(name="resnet50", image_size=32, num_classes=10)),
    "vgg16": lambda: classifier(ClassificationConfig(name="vgg16", image_size=32, num_classes=10)),
    "resnet_cifar": lambda: classifier(ClassificationConfig(name="resnet_cifar", image_size=32, num_classes=10)),
    "ssd300": lambda: detector(DetectionConfig()),
    "ncf": lambda: recommender(RecommendationConfig(num_users=500, num_items=300)),
    "transformer": lambda: build_transformer(**SIZES["tiny"].kwargs()),
}
import bare_tf_classification, bare_tf_ncf, bare_tf_ssd300
models.update({
    "bare resnet50": lambda: bare_tf_classification.MODELS["resnet50"](32, 10),
    "bare vgg16": lambda: bare_tf_classification.MODELS["vgg16"](32, 10),
    "bare ncf": lambda: bare_tf_ncf.neumf(*table_sizes(RecommendationConfig(num_users=500, num_items=300))),
    "bare ssd300": lambda: bare_tf_ssd300.ssd300(300, 81),
})
out = {}
for name in json.loads(sys.argv[2]):
    out[name] = duplicates(models[name]())
    keras.backend.clear_session()
print("DUP " + json.dumps(out))
"""


NETWORKS = ["resnet50", "vgg16", "resnet_cifar", "ssd300", "ncf", "transformer"]
NETWORKS += ["bare resnet50", "bare vgg16", "bare ncf", "bare ssd300"]
# two processes at once, one per core, each building about half of the weights (an SSD300 in each)
FIRST = ("resnet50", "resnet_cifar", "ssd300", "transformer", "bare vgg16")
HALVES = [[n for n in NETWORKS if n in FIRST], [n for n in NETWORKS if n not in FIRST]]


def _build(names: list[str]) -> dict[str, list]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT / "yardsticks"), json.dumps(names)],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(s for s in done.stdout.splitlines() if s.startswith("DUP "))
    return json.loads(line[4:])


@pytest.fixture(scope="module")
def duplicates() -> dict[str, list]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return {k: v for part in pool.map(_build, HALVES) for k, v in part.items()}


def test_every_network_built_is_checked(duplicates: dict[str, list]) -> None:
    assert sorted(duplicates) == sorted(NETWORKS)


@pytest.mark.parametrize("model", NETWORKS)
def test_no_two_weights_start_equal(duplicates: dict[str, list], model: str) -> None:
    assert duplicates[model] == [], f"{model}: weights that start equal: {duplicates[model][:5]}"
