"""Issue #15's CPU acceptance through the real CLI: NCF in TF, PyTorch and MXNet, fp32 and amp, train and
infer, on synthetic ids at the smoke size; every run FINISHED, measured in samples/s, with the precision
read from the real outputs of an embedding and a dense layer."""

from __future__ import annotations

import pytest

from tests.conftest import MXNET_BF16, TF_BF16

pytestmark = pytest.mark.slow


def test_ncf_sweep_over_frameworks_precisions_and_modes(cli):
    res = cli.run(
        [
            "framework=tf,torch,mxnet",
            "model=ncf",
            "precision=fp32,amp",
            "mode=train,infer",
            "+experiment=smoke",
        ],
        timeout=1500,
        OMP_NUM_THREADS="1",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    kids = [r for r in cli.runs() if "mlflow.parentRunId" in r.data.tags]
    jobs = {
        (r.data.params["framework.name"], r.data.params["precision.name"], r.data.params["mode"]): r
        for r in kids
    }
    bf16 = {"tf": TF_BF16, "torch": True, "mxnet": MXNET_BF16}  # amp on a CPU is bfloat16
    default_mode = {"tf": "graph", "torch": "eager", "mxnet": "hybridized"}  # execution when none is set
    skipped = [(fw, "amp", m) for fw in ("tf", "torch", "mxnet") for m in ("train", "infer") if not bf16[fw]]
    assert sorted(jobs) == sorted(
        (fw, p, m) for fw in ("tf", "torch", "mxnet") for p in ("fp32", "amp") for m in ("train", "infer")
        if (fw, p, m) not in skipped
    )  # fmt: skip
    assert all(r.info.status == "FINISHED" for r in kids)
    assert [c.split(":")[0] for c in cli.not_run()] == sorted(
        f"{fw} ncf amp {m} {default_mode[fw]}" for fw, _, m in skipped
    )
    assert all("AVX-512" in c for c in cli.not_run())
    for (framework, precision, mode), run in jobs.items():
        params, tags = run.data.params, run.data.tags
        assert params["throughput_unit"] == "samples" and run.data.metrics["throughput"] > 0
        assert params["model.params"] == "143937"  # smoke size: 64 users x 128 items
        assert tags["precision.first_layer"].endswith("(Embedding)"), (
            framework,
            tags["precision.first_layer"],
        )
        assert tags["precision.last_layer"].split()[-1] in ("(Linear)", "(Dense)", "(FullyConnected)")
        expected = "float32" if precision == "fp32" else "bfloat16"  # CPU: amp = bf16 autocast
        assert tags["precision.compute_dtype"] == tags["precision.last_layer_dtype"] == expected
        assert tags["precision.param_dtype"] == "float32"
        # torch and MXNet keep embedding lookups in float32 under AMP; Keras casts them to the compute dtype
        embedding = expected if framework == "tf" else "float32"
        assert tags["precision.first_layer_dtype"] == embedding, (framework, precision, mode)
        assert tags["run.optimizer"].startswith("adam" if mode == "train" else "none")
