"""yardsticks/profile_tf_step.py end to end on the CPU at a tiny size: graph mode and XLA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "yardsticks" / "profile_tf_step.py"
TINY = [
    "--model",
    "tiny",
    "--batch",
    "2",
    "--image-size",
    "32",
    "--warmup",
    "1",
    "--steps",
    "1",
    "--device",
    "cpu",
]


def profile(tmp_path: Path, *extra: str) -> dict:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *TINY, "--out", str(tmp_path), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROFILE ")]
    assert len(lines) == 1, proc.stdout[-3000:]
    return json.loads(lines[0][len("PROFILE ") :])


@pytest.mark.parametrize("xla", [False, True], ids=["graph", "xla"])
def test_profile_tf_step_cpu(tmp_path: Path, xla: bool) -> None:
    s = profile(tmp_path, *(["--xla"] if xla else []))
    assert s["xla"] is xla
    assert s["device"] == "/CPU:0" and s["batch"] == 2
    assert s["wall_ms_per_step"] > 0
    assert "error" not in s, s.get("error")
    assert s["note"].startswith("no GPU plane") and s["gpu_busy_ms_per_step"] is None
    names = [name for name, _, _ in s["top_host_ops"]]
    events = [name for name, _, _ in s["top_host_events"]]
    assert names and all(ms >= 0 and n > 0 for _, ms, n in s["top_host_ops"])
    assert any("train_step" in name for name in events), events
    if xla:  # the step runs as one compiled XLA executable
        assert any("Executable" in name or "Thunk" in name for name in events), events
    else:  # the executor runs the graph's TF ops one by one
        types = [t for t, _, _ in s["top_host_op_types"]]
        # oneDNN's rewrite renames them on x86 (e.g. _MklNativeConv2DBackpropFilter)
        assert any("Conv2D" in t for t in types), types
    full = json.loads((tmp_path / "summary.json").read_text())
    assert full["summary"] == s and full["xplane_module"]
    assert Path(s["xplane_path"]).is_file()
    assert (tmp_path / "xplane_path.txt").read_text().strip() == s["xplane_path"]


def test_gpu_plane_summary() -> None:
    """The GPU-plane arithmetic on a hand-made XSpace: kernels summed by name over streams, busy time as the
    union of their intervals, derived lines left out, everything per step."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import profile_tf_step as p
    finally:
        sys.path.remove(str(SCRIPT.parent))
    mod, _ = p.load_xplane_module()
    if mod is None:
        pytest.skip("no xplane_pb2 importable")
    plane = mod.XSpace().planes.add(name="/device:GPU:0")
    plane.event_metadata[1].name = "sm90_xmma_fprop_implicit_gemm_nhwc"
    plane.event_metadata[2].name = "loop_add_fusion"
    ms = 10**9  # picoseconds per millisecond
    for line_name, evs in (
        ("Stream #7(Compute)", [(1, 0, 2 * ms), (2, 3 * ms, 1 * ms)]),
        ("Stream #9(Compute)", [(1, 1 * ms, 2 * ms)]),  # overlaps the first: busy 0-4 ms of 0-4 ms
        ("XLA Ops", [(2, 0, 50 * ms)]),  # derived: not a kernel
    ):
        line = plane.lines.add(name=line_name, timestamp_ns=1000)
        for mid, off, dur in evs:
            line.events.add(metadata_id=mid, offset_ps=off, duration_ps=dur)
    g = p.gpu_summary(plane, steps=2)
    assert g["busy_ms_per_step"] == pytest.approx(2.0)
    assert g["kernel_sum_ms_per_step"] == pytest.approx(2.5)
    assert g["kernels_per_step"] == 1.5
    assert g["by_category"] == {"convolution": 2.0, "xla fusion": 0.5}
    assert g["kernels"][0][:3] == ["sm90_xmma_fprop_implicit_gemm_nhwc", 2.0, 1.0]
