"""Which cells a machine can run, decided before a run is made (dlbench.backends.capability).

The rules are checked on stated machines (CPU flags and GPUs given), and the two rules that rest on a
library's behaviour are checked against the library itself on this CPU, with and without oneDNN capped to
AVX2: MXNet's bfloat16 needing oneDNN's AVX-512 kernels, and TensorFlow's bfloat16 failing on an AVX-512 CPU
whose oneDNN is capped below them. The prediction must agree with what really runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dlbench.backends import capability
from dlbench.config import JobConfig, validate
from dlbench.core import cpu
from dlbench.errors import ConfigError
from tests.worker_jobs import worker_env

AVX2 = frozenset({"sse4_1", "avx", "avx2", "fma"})
AVX512 = AVX2 | cpu.AVX512_CORE
SAPPHIRE = AVX512 | {"avx512_bf16", "amx_bf16", "avx512_fp16"}
H200 = [("NVIDIA H200", (9, 0))]
V100 = [("Tesla V100-SXM2-16GB", (7, 0))]
CAP = {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2"}
PRECISIONS = {
    "fp32": {"name": "fp32", "autocast": False, "dtype": "float32", "cpu_dtype": "float32"},
    "amp": {"name": "amp", "autocast": True, "dtype": "float16", "cpu_dtype": "bfloat16"},
    "fp16": {"name": "amp", "autocast": True, "dtype": "float16", "cpu_dtype": "float16"},
}


def job(framework: str, precision: str = "amp", device: str = "auto", **data) -> JobConfig:
    return JobConfig.from_dict(
        {"framework": {"name": framework}, "precision": PRECISIONS[precision], "device": device, "data": data}
    )


@pytest.fixture
def flags(monkeypatch):
    """Pretend to be a CPU with the given flags, and no oneDNN cap unless a test sets one."""
    for var in cpu.CAP_VARS:
        monkeypatch.delenv(var, raising=False)

    def use(which: frozenset[str]) -> None:
        monkeypatch.setattr(cpu, "cpu_flags", lambda: which)

    return use


def test_the_cap_is_read_from_either_variable_and_ranks_isas():
    assert cpu.isa_cap({}) is None
    assert cpu.isa_cap({"DNNL_MAX_CPU_ISA": "avx2"}) == "AVX2"
    assert cpu.isa_cap({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "DNNL_MAX_CPU_ISA": "AVX2"}) == "AVX512_CORE"
    assert not cpu.cap_allows("AVX512_CORE", {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert cpu.cap_allows("AVX2", {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert cpu.cap_allows("AVX512_CORE", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"})
    assert not cpu.cap_allows("AVX512_CORE_BF16", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"})
    assert cpu.cap_allows("AVX512_CORE", {"ONEDNN_MAX_CPU_ISA": "NOT_AN_ISA"})  # oneDNN ignores it too


def test_mxnet_bfloat16_needs_avx512_and_no_cap_below_it(flags, monkeypatch):
    flags(AVX2)
    reason = capability.check(job("mxnet"), gpus=[]).reason
    assert "bfloat16" in reason and "AVX-512" in reason and "avx512f" in reason
    flags(AVX512)
    assert capability.check(job("mxnet"), gpus=[]).reason is None
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in capability.check(job("mxnet"), gpus=[]).reason
    assert capability.check(job("mxnet", "fp32"), gpus=[]).reason is None


def test_mxnet_has_no_float16_on_a_cpu_and_no_code_for_hopper(flags):
    flags(SAPPHIRE)
    assert "float16" in capability.check(job("mxnet", "fp16"), gpus=[]).reason
    refused = capability.check(job("mxnet", device="cuda"), gpus=H200).reason
    assert "NVIDIA H200 (sm_90)" in refused
    # device=auto on a Hopper GPU: MXNet falls back to the CPU, where amp is bfloat16 and runs here
    assert capability.where(job("mxnet"), H200).kind == "cpu"
    assert capability.check(job("mxnet"), gpus=H200).reason is None
    flags(AVX2)  # ... but not on an AVX2-only host
    assert "AVX-512" in capability.check(job("mxnet"), gpus=H200).reason
    # a pre-Hopper GPU: amp is float16 on the GPU, which MXNet's CUDA builds have
    assert capability.where(job("mxnet"), V100).kind == "cuda"
    assert capability.check(job("mxnet"), gpus=V100).reason is None


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_torch_and_tf_run_emulated_bfloat16_and_say_so(flags, framework):
    flags(AVX2)
    verdict = capability.check(job(framework), gpus=[])
    assert verdict.reason is None
    assert len(verdict.notes) == 1 and "bfloat16 on this CPU is emulated" in verdict.notes[0]
    assert capability.check(job(framework, "fp32"), gpus=[]).notes == []
    assert "float16 on this CPU is emulated" in capability.check(job(framework, "fp16"), gpus=[]).notes[0]
    flags(SAPPHIRE)
    assert capability.check(job(framework), gpus=[]).notes == []
    assert capability.check(job(framework), gpus=H200).notes == []  # float16 on the GPU


def test_tf_bfloat16_is_not_run_on_an_avx512_cpu_capped_below_it(flags, monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    flags(SAPPHIRE)
    reason = capability.check(job("tf"), gpus=[]).reason
    assert "bfloat16" in reason and "ONEDNN_MAX_CPU_ISA=AVX2" in reason and "\n" not in reason
    assert capability.check(job("tf", "fp32"), gpus=[]).reason is None
    assert capability.check(job("tf"), gpus=H200).reason is None  # float16 on the GPU
    assert capability.check(job("torch"), gpus=[]).reason is None  # torch honours the cap
    flags(AVX2)  # a CPU without AVX-512: TensorFlow keeps bfloat16 off oneDNN, emulated
    verdict = capability.check(job("tf"), gpus=[])
    assert verdict.reason is None and "emulated" in verdict.notes[0]
    flags(SAPPHIRE)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE")
    assert capability.check(job("tf"), gpus=[]).reason is None


@pytest.mark.parametrize("framework", ["torch", "tf", "mxnet"])
def test_gpu_only_options_without_a_gpu_are_not_run(flags, framework):
    flags(SAPPHIRE)
    assert "device=cuda: no NVIDIA GPU" in capability.check(job(framework, device="cuda"), gpus=[]).reason
    real = JobConfig.from_dict({"framework": {"name": framework}, "data": {"decode": "gpu"}})
    real.dataset.name = "imagenet"
    assert "data.decode=gpu" in capability.check(real, gpus=[]).reason
    real.dataset.name = "synthetic"  # nothing to decode: the option does not apply
    assert capability.check(real, gpus=[]).reason is None


PROBE = """
from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.precision import check_dtype_runs
check_dtype_runs("bfloat16", mx.cpu(), "probe")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/cpuinfo")
@pytest.mark.parametrize("capped", [False, True], ids=["as-is", "onednn-capped-to-avx2"])
def test_prediction_agrees_with_a_real_mxnet_bfloat16_convolution(capped):
    """On this CPU: MXNet's own bfloat16 convolution runs exactly when the check says the cell can run.
    Capped to AVX2 it must fail on every CPU, AVX-512 ones included: that is what lets a server stand in
    for an AVX2-only laptop (bundled oneDNN 2.x honours ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA)."""
    env = worker_env(OMP_NUM_THREADS="1")
    for var in cpu.CAP_VARS:
        env.pop(var, None)
    env |= CAP if capped else {}
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    predicted = cpu.onednn_avx512_core(env) is None
    assert (proc.returncode == 0) == predicted, proc.stderr[-2000:]
    if capped:
        assert proc.returncode != 0 and "bfloat16" in proc.stderr


TF_PROBE = """
import tensorflow as tf
x, w = tf.ones([2, 8, 8, 4], tf.bfloat16), tf.ones([3, 3, 4, 4], tf.bfloat16)
tf.function(lambda: tf.nn.conv2d(x, w, 1, "SAME"))().numpy()
a = tf.ones([16, 16], tf.bfloat16)
tf.matmul(a, a).numpy()
print("RAN")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/cpuinfo")
@pytest.mark.parametrize("capped", [False, True], ids=["as-is", "onednn-capped-to-avx2"])
def test_prediction_agrees_with_real_tf_bfloat16_kernels(capped):
    """On this CPU: TensorFlow's traced bfloat16 convolution and eager bfloat16 matmul run exactly when the
    check says its bfloat16 cells can run. If a TensorFlow release starts honouring the cap, this fails on
    an AVX-512 machine and the rule (backends/tensorflow/capability.py) should go."""
    from dlbench.backends.tensorflow.capability import bf16_under_cap

    env = worker_env(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    for var in cpu.CAP_VARS:
        env.pop(var, None)
    env |= CAP if capped else {}
    proc = subprocess.run(
        [sys.executable, "-c", TF_PROBE], env=env, capture_output=True, text=True, timeout=180
    )
    predicted = bf16_under_cap(env) is None
    ran = proc.returncode == 0 and "RAN" in proc.stdout
    assert ran == predicted, (proc.returncode, proc.stderr[-2000:])


def _decoding(framework: str, loop: str, mode: str = "infer", **knobs) -> JobConfig:
    model = {"name": "transformer", "task": "translation", "decode_loop": loop}
    return JobConfig.from_dict(
        {"framework": {"name": framework, **knobs}, "model": model, "mode": mode, "device": "cpu"}
    )


@pytest.mark.parametrize("framework", ["torch", "mxnet"])
def test_a_decode_in_one_call_is_not_run_where_decoding_is_a_host_loop(framework):
    reason = capability.check(_decoding(framework, "device", compile=True)).reason
    assert reason is not None and "decodes from the host" in reason and "framework=tf and jax" in reason
    assert capability.check(_decoding(framework, "host")).reason is None
    assert (
        capability.check(_decoding(framework, "device", mode="train")).reason is None
    )  # training never decodes


@pytest.mark.parametrize(("framework", "knob"), [("tf", "xla"), ("jax", "jit")])
def test_a_decode_in_one_call_needs_the_compiled_execution(framework, knob):
    assert capability.check(_decoding(framework, "device", **{knob: True})).reason is None
    reason = capability.check(_decoding(framework, "device", **{knob: False})).reason
    assert reason is not None and "execution=compiled" in reason and f"framework.{knob}=true" in reason
    assert capability.check(_decoding(framework, "host", **{knob: False})).reason is None


def test_an_unknown_decode_loop_is_a_config_error():
    with pytest.raises(ConfigError, match="model.decode_loop=gpu: choose one of host, device"):
        validate(_decoding("tf", "gpu", xla=True))
