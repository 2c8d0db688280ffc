"""yardsticks/kernel_table.py on hand-made traces of the two shapes it reads (torch.profiler's Chrome trace,
JAX's trace viewer JSON), and the torch and JAX yardsticks' --profile end to end on the CPU: a window recorded
after the timed ones, its trace and summary written where the flag says."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from yardsticks import kernel_table

ROOT = Path(__file__).resolve().parents[2]
YARD = ROOT / "yardsticks"
CONV = "sm90_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc"


def kernel(name: str, ts: float, dur: float, **where) -> dict:
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, **where}


def meta(kind: str, name: str, pid: int, tid: int | None = None) -> dict:
    e = {"ph": "M", "name": kind, "pid": pid, "args": {"name": name}}
    return e if tid is None else {**e, "tid": tid}


def torch_trace() -> dict:
    """torch.profiler's export: GPU work by category; host ops and annotations are not GPU work."""
    return {
        "traceEvents": [
            kernel("aten::convolution", 0, 900, cat="cpu_op", pid=1, tid=1),
            kernel(CONV, 100, 400, cat="kernel", pid=0, tid=7),
            kernel("triton_poi_fused_relu_0", 600, 100, cat="kernel", pid=0, tid=7),
            kernel("Memcpy HtoD (Pageable -> Device)", 50, 100, cat="gpu_memcpy", pid=0, tid=8),
            kernel("ProfilerStep#1", 0, 1000, cat="gpu_user_annotation", pid=0, tid=7),
        ]
    }


def jax_trace() -> dict:
    """JAX's trace viewer JSON: a GPU process with stream threads and derived ones, and the host's."""
    return {
        "traceEvents": [
            meta("process_name", "/host:CPU", 1),
            meta("process_name", "/device:GPU:0", 2),
            meta("thread_name", "Stream #13(Compute)", 2, 13),
            meta("thread_name", "Stream #14(Compute)", 2, 14),
            meta("thread_name", "XLA Ops", 2, 20),
            meta("thread_name", "python", 1, 5),
            kernel(CONV, 0, 400, pid=2, tid=13),
            kernel("loop_add_fusion", 300, 200, pid=2, tid=14),  # overlaps the conv: busy 0-500
            kernel(CONV, 1000, 400, pid=2, tid=13),
            kernel("fusion.1", 0, 2000, pid=2, tid=20),  # derived: the op the kernels belong to
            kernel("PjitFunction(step)", 0, 2000, pid=1, tid=5),  # the host's
        ]
    }


def test_torch_trace_gives_gpu_work_only() -> None:
    s = kernel_table.summarize(kernel_table.gpu_events(torch_trace()), steps=1)
    assert s["by_category"] == {"convolution": 0.4, "copies": 0.1, "elementwise": 0.1}
    assert s["kernels_per_step"] == 2 and s["events_per_step"] == 3
    assert s["busy_ms_per_step"] == pytest.approx(0.55)  # 50-150 and 100-500 overlap, 600-700


def test_jax_trace_gives_the_gpu_streams_without_derived_lines() -> None:
    s = kernel_table.summarize(kernel_table.gpu_events(jax_trace()), steps=2)
    assert [k[:3] for k in s["kernels"]] == [[CONV, 0.4, 1.0], ["loop_add_fusion", 0.1, 0.5]]
    assert s["by_category"] == {"convolution": 0.4, "xla fusion": 0.1}
    assert s["busy_ms_per_step"] == pytest.approx(0.45)  # (500 + 400) us over 2 steps
    assert s["kernel_sum_ms_per_step"] == pytest.approx(0.5)


def test_profile_reads_the_newest_gzipped_trace_under_a_folder(tmp_path: Path) -> None:
    old, new = tmp_path / "plugins/profile/1", tmp_path / "plugins/profile/2"
    for folder, trace in ((old, torch_trace()), (new, jax_trace())):
        folder.mkdir(parents=True)
        with gzip.open(folder / "host.trace.json.gz", "wt") as f:
            json.dump(trace, f)
    (new / "perfetto_trace.json.gz").write_bytes(b"not read")
    os.utime(old / "host.trace.json.gz", (1, 1))
    s = kernel_table.profile(tmp_path, steps=2)
    assert s["trace"] == str(new / "host.trace.json.gz") and s["steps"] == 2
    assert s["by_category"] == {"convolution": 0.4, "xla fusion": 0.1}


def test_the_cli_prints_a_table_and_one_profile_line(tmp_path: Path) -> None:
    (tmp_path / "trace.json").write_text(json.dumps(jax_trace()))
    done = subprocess.run(
        [sys.executable, str(YARD / "kernel_table.py"), str(tmp_path), "--steps", "2"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "convolution" in done.stdout and CONV in done.stdout
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("PROFILE ")]
    assert json.loads(line[8:])["top"][0][:2] == [CONV, 0.4]


def test_the_cli_names_a_folder_without_a_trace_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(YARD / "kernel_table.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"kernel_table: no trace.json or *.trace.json.gz under {tmp_path}"
    ]


@pytest.mark.parametrize(
    ("kernel", "category"),
    [
        ("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", "convolution"),
        ("void cudnn::ops::nchwToNhwcKernel<__half, __half, float, false, true>", "layout transpose"),
        (
            "void tensorflow::functor::SwapDimension1And2InTensor3UsingTiles<unsigned int, 256, 32>",
            "layout transpose",
        ),
        ("void cudnn::bn_fw_tr_1C11_singleread_spec<__half, float>", "batch norm"),
        ("void tensorflow::BiasNHWCKernel<Eigen::half>(int, Eigen::half const*)", "elementwise"),
        ("void tensorflow::functor::ColumnReduceKernel<float const*, float*, cub::Sum>", "reduction"),
        ("input_convert_reduce_fusion_3", "xla fusion"),
        ("loop_add_fusion", "xla fusion"),
        ("triton_gemm_dot_fusion_1", "matmul"),
        ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64", "matmul"),
        ("Memcpy HtoD (Pageable to Device)", "copies"),
        ("void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<...scalar_max_op...>>", "elementwise"),
        ("redzone_checker", "other"),
    ],
)
def test_categorize(kernel: str, category: str) -> None:
    assert kernel_table.categorize(kernel) == category
