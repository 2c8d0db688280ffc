"""SSD300 is one network and one loss in all three frameworks.

Each framework runs in its own subprocess (frameworks never share a process). The torch model is the
reference: it is built, given random BatchNorm statistics and affine parameters (so eval-mode BN and the
weight loaders are really exercised), and its weights are exported under the neutral names. TF and MXNet
load that dict, run the same 300x300 image in inference mode, and compute the multibox loss and its
gradients on the same encoded targets. Checked: 22,894,902 trainable parameters everywhere (backbone
8,543,296), loc (1, 4, 8732) / conf (1, 81, 8732), equal outputs, equal loss and gradients.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dlbench.data.detection_synthetic import random_ground_truth
from dlbench.data.ssd_boxes import dboxes300_coco, encode_batch
from tests.worker_jobs import worker_env

SSD300_PARAMS = 22_894_902  # DLE's PyTorch SSD300 (ResNet-50) with random weights
BACKBONE_PARAMS = 8_543_296

PROLOGUE = """
import sys
import numpy as np
inp, weights_path, out_path = sys.argv[1:4]
io = dict(np.load(inp))
out = {}
"""

TORCH = """
import torch
from dlbench.backends.torch.models import detection as d
torch.manual_seed(0)
m = d.ssd300()
g = torch.Generator().manual_seed(1)
with torch.no_grad():
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.normal_(0.0, 0.1, generator=g)
            mod.running_var.uniform_(0.5, 1.5, generator=g)
            mod.weight.uniform_(0.5, 1.5, generator=g)
            mod.bias.normal_(0.0, 0.1, generator=g)
np.savez(weights_path, **d.export_weights(m))
m.eval()
out["params"] = d.trainable_params(m)
out["backbone_params"] = sum(p.numel() for p in m.backbone.parameters())
with torch.no_grad():
    loc, conf = m(torch.from_numpy(io["image"]))
out["loc"], out["conf"] = loc.numpy(), conf.numpy()
ploc = torch.from_numpy(io["ploc"]).requires_grad_()
pconf = torch.from_numpy(io["pconf"]).requires_grad_()
loss = d.ssd_loss(ploc, pconf, torch.from_numpy(io["gloc"]), torch.from_numpy(io["glabel"]))
loss.backward()
out["loss"], out["dloc"], out["dconf"] = loss.item(), ploc.grad.numpy(), pconf.grad.numpy()
"""

TF = """
import tensorflow as tf
from dlbench.backends.tensorflow.models import detection as d
m = d.ssd300()
out["params"] = d.trainable_params(m)
d.load_weights(m, dict(np.load(weights_path)))
loc, conf = m(io["image"].transpose(0, 2, 3, 1), training=False)
out["loc"], out["conf"] = loc.numpy(), conf.numpy()
ploc, pconf = tf.constant(io["ploc"]), tf.constant(io["pconf"])
with tf.GradientTape() as tape:
    tape.watch([ploc, pconf])
    loss = d.ssd_loss(ploc, pconf, tf.constant(io["gloc"]), tf.constant(io["glabel"]))
dloc, dconf = tape.gradient(loss, [ploc, pconf])
out["loss"], out["dloc"], out["dconf"] = float(loss), dloc.numpy(), dconf.numpy()
"""

MXNET = """
from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.models import detection as d
m = d.ssd300()
d.initialize(m, mx.cpu())
out["params"] = d.trainable_params(m)
d.load_weights(m, dict(np.load(weights_path)))
m.hybridize()
loc, conf = m(mx.nd.array(io["image"]))
out["loc"], out["conf"] = loc.asnumpy(), conf.asnumpy()
ploc, pconf = mx.nd.array(io["ploc"]), mx.nd.array(io["pconf"])
ploc.attach_grad()
pconf.attach_grad()
loss_fn = d.SSDLoss()
loss_fn.hybridize()
with mx.autograd.record():
    loss = loss_fn(ploc, pconf, mx.nd.array(io["gloc"]), mx.nd.array(io["glabel"], dtype="float32"))
loss.backward()
out["loss"], out["dloc"], out["dconf"] = float(loss.asscalar()), ploc.grad.asnumpy(), pconf.grad.asnumpy()
"""

EPILOGUE = """
np.savez(out_path, **out)
"""

SNIPPETS = {"torch": TORCH, "tf": TF, "mxnet": MXNET}


def _run(fw: str, tmp: Path) -> dict[str, np.ndarray]:
    script = PROLOGUE + SNIPPETS[fw] + EPILOGUE
    out = tmp / f"{fw}.npz"
    env = worker_env(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2", MXNET_ENGINE_TYPE="NaiveEngine")
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp / "inputs.npz"), str(tmp / "weights.npz"), str(out)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, f"{fw}:\n{proc.stderr[-3000:]}"
    return dict(np.load(out))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict[str, np.ndarray]]:
    tmp = tmp_path_factory.mktemp("ssd")
    rng = np.random.default_rng(0)
    dboxes = dboxes300_coco()
    boxes, labels = random_ground_truth(rng, 2, max_boxes=6)
    labels[1] = labels[1][:0]  # an image without objects: it must contribute 0 to the loss
    boxes[1] = boxes[1][:0]
    gloc, glabel = encode_batch(boxes, labels, dboxes)
    np.savez(
        tmp / "inputs.npz",
        image=rng.standard_normal((1, 3, 300, 300), dtype=np.float32),
        ploc=rng.standard_normal((2, 4, dboxes.count), dtype=np.float32),
        pconf=rng.standard_normal((2, 81, dboxes.count), dtype=np.float32) * 2,
        gloc=gloc,
        glabel=glabel,
    )
    ref = _run("torch", tmp)  # writes the weights the others load
    with ThreadPoolExecutor(2) as pool:
        others = {fw: pool.submit(_run, fw, tmp) for fw in ("tf", "mxnet")}
        return {"torch": ref, **{fw: f.result() for fw, f in others.items()}}


@pytest.mark.parametrize("fw", ["torch", "tf", "mxnet"])
def test_parameter_count_equals_dle(results, fw):
    assert int(results[fw]["params"]) == SSD300_PARAMS
    if fw == "torch":
        assert int(results[fw]["backbone_params"]) == BACKBONE_PARAMS


@pytest.mark.parametrize("fw", ["tf", "mxnet"])
def test_identical_weights_give_identical_outputs(results, fw):
    ref, got = results["torch"], results[fw]
    for key, rows in (("loc", 4), ("conf", 81)):
        assert ref[key].shape == got[key].shape == (1, rows, 8732)
        scale = np.abs(ref[key]).max()
        np.testing.assert_allclose(got[key], ref[key], rtol=0, atol=5e-5 * scale, err_msg=f"{fw} {key}")


@pytest.mark.parametrize("fw", ["tf", "mxnet"])
def test_loss_and_gradients_equal_torch(results, fw):
    ref, got = results["torch"], results[fw]
    assert float(ref["loss"]) > 0
    np.testing.assert_allclose(float(got["loss"]), float(ref["loss"]), rtol=1e-5)
    for key in ("dloc", "dconf"):
        np.testing.assert_allclose(got[key], ref[key], rtol=1e-4, atol=1e-7, err_msg=f"{fw} {key}")
    # the image without objects gets no gradient at all
    assert not np.any(got["dconf"][1]) and not np.any(got["dloc"][1])
