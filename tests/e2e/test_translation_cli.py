"""The translation workload through the real CLI and MLflow: every framework trains and decodes the tiny
Transformer at mixed precision, measured in target tokens/s (train) and generated tokens/s (infer)."""

from __future__ import annotations

import pytest

from tests.conftest import MXNET_BF16, TF_BF16

pytestmark = pytest.mark.slow


def test_transformer_smoke_sweep_trains_and_decodes_in_every_framework(cli):
    overrides = ["framework=tf,torch,mxnet", "model=transformer", "precision=amp", "mode=train,infer"]
    res = cli.run([*overrides, "+experiment=smoke"], timeout=1500)
    assert res.returncode == 0, res.stderr[-3000:]
    kids = [r for r in cli.runs() if r.data.tags.get("mlflow.parentRunId")]
    jobs = sorted((r.data.params["framework.name"], r.data.params["mode"]) for r in kids)
    bf16 = {"tf": TF_BF16, "torch": True, "mxnet": MXNET_BF16}  # amp on a CPU is bfloat16
    frameworks = [fw for fw in ("tf", "torch", "mxnet") if bf16[fw]]  # the others' cells are not run
    assert jobs == sorted((fw, mode) for fw in frameworks for mode in ("train", "infer"))
    default_mode = {"tf": "graph", "torch": "eager", "mxnet": "hybridized"}  # execution when none is set
    skipped = sorted(
        f"{fw} transformer amp {m} {default_mode[fw]}"
        for fw in bf16
        if not bf16[fw]
        for m in ("train", "infer")
    )
    assert [c.split(":")[0] for c in cli.not_run()] == skipped
    if skipped:
        assert "not run on this machine" in res.stdout + res.stderr and "AVX-512" in res.stdout + res.stderr
    for run in kids:
        p, t, m = run.data.params, run.data.tags, run.data.metrics
        assert run.info.status == "FINISHED", p["framework.name"]
        unit = "target tokens" if p["mode"] == "train" else "generated tokens"
        assert p["throughput_unit"] == unit and m["throughput"] > 0
        assert p["model.size"] == "tiny" and p["model.task"] == "translation"
        assert t["precision.compute_dtype"] == "bfloat16"  # verified on the real outputs, CPU autocast
        assert "attention" in t["run.attention"] or "batch_dot" in t["run.attention"]
        assert 1 / 16 <= float(t["run.samples_per_unit"]) <= 1  # smoke: 16 tokens per sentence, 4 a batch
        if p["mode"] == "train":
            assert m["loss_last"] > 0
    if MXNET_BF16:  # no bf16 interleaved kernels on CPU
        mx_train = next(r for r in kids if r.data.params["framework.name"] == "mxnet")
        assert mx_train.data.tags["run.attention"] == "mxnet.batch_dot+softmax"


def test_decoding_in_one_compiled_call_runs_compiled_tf_and_jax_and_skips_the_rest(cli):
    """model.decode_loop=device: TF under XLA and JAX under jit decode every position in one call (the
    built model says so in run.decode_loop); the cells that cannot (PyTorch, and TF and JAX uncompiled)
    are not run, each with one line naming why."""
    overrides = ["framework=tf,jax,torch", "execution=compiled,eager", "model=transformer", "mode=infer"]
    res = cli.run(
        [*overrides, "model.decode_loop=device", "precision=fp32", "+experiment=smoke"], timeout=900
    )
    assert res.returncode == 0, res.stderr[-3000:]
    kids = [r for r in cli.runs() if r.data.tags.get("mlflow.parentRunId")]
    assert sorted(r.data.params["framework.name"] for r in kids) == ["jax", "tf"]
    for run in kids:
        assert run.info.status == "FINISHED" and run.data.metrics["throughput"] > 0
        assert run.data.params["model.decode_loop"] == "device"
        assert run.data.tags["run.decode_loop"] == "device"
        assert run.data.tags["run.execution"] in ("xla", "jit")
    reasons = [c.split(": ", 1) for c in cli.not_run()]
    assert [cell for cell, _ in reasons] == [  # eager and compiled torch told apart
        f"{fw} transformer fp32 infer {mode}"
        for fw, mode in (
            ("jax", "eager"),
            ("tf", "graph"),
            ("torch", "eager"),
            ("torch", "torch.compile(default)"),
        )
    ]
    assert reasons[0][1].endswith("framework=jax needs execution=compiled (framework.jit=true)")
    assert reasons[1][1].endswith("framework=tf needs execution=compiled (framework.xla=true)")
    assert all("framework=torch decodes from the host" in why for _, why in reasons[2:])  # compiled and eager
