"""The hand-written PyTorch yardsticks (yardsticks/bare_ssd300.py, bare_transformer.py, bare_ncf.py, and the
torchvision loop bare_loop.py) at tiny settings on the CPU, each in its own process: they build the full-size
network (the parameter count must be the published one, or the harness would be compared with a different
model), train or infer, and print one BARE line."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "yardsticks"
TINY = ["--device", "cpu", "--precision", "fp32", "--warmup", "1", "--steps", "1", "--windows", "2"]
CASES = {  # script: (full-size parameter count, unit in training, tiny shape flags)
    "bare_ssd300.py": (22_894_902, "img/s", ["--batch", "2"]),  # BatchNorm needs 2 at 1x1
    "bare_transformer.py": (60_522_496, "target tokens/s", ["--batch-tokens", "32", "--max-len", "16"]),
    "bare_ncf.py": (31_832_577, "samples/s", ["--batch", "1000"]),
}


def bare_all(script: str, *args: str) -> tuple[int, list[dict], str]:
    """Run a yardstick; return (exit code, its BARE results in order, stderr)."""
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args], capture_output=True, text=True, env=env, timeout=900
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("BARE ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.returncode, [json.loads(x.removeprefix("BARE ")) for x in lines], proc.stderr


def bare(script: str, *args: str) -> tuple[int, dict, str]:
    rc, results, err = bare_all(script, *args)
    assert len(results) == 1, results
    return rc, results[0], err


@pytest.mark.parametrize("script", CASES)
def test_training_reports_the_published_parameter_count_and_a_finite_loss(script):
    params, unit, shape = CASES[script]
    rc, r, err = bare(script, *TINY, *shape)
    assert rc == 0, err[-3000:]
    assert r["params"] == params
    assert r["unit"] == unit and r["mode"] == "train" and r["compute_dtype"] == "float32"
    assert isinstance(r["loss_last"], float) and math.isfinite(r["loss_last"]) and r["loss_finite"] is True
    assert len(r["all"]) == 2 and all(x > 0 for x in r["all"])
    assert min(r["all"]) <= r["p05"] <= r["throughput"] <= r["p95"] <= max(r["all"])


@pytest.mark.parametrize("script", CASES)
def test_inference_runs_forward_only_under_the_chosen_precision(script):
    params, _, shape = CASES[script]
    extra = ["--decode-len", "3"] if script == "bare_transformer.py" else []
    # SSD300 runs at 300x300 and a CPU without native bfloat16 emulates it (minutes); bf16 autocast is
    # bare_common's one switch for every script, so the Transformer and NCF show it
    dtype = "float32" if script == "bare_ssd300.py" else "bfloat16"
    precision = {"float32": "fp32", "bfloat16": "bf16"}[dtype]
    rc, r, err = bare(script, *TINY, *shape, *extra, "--mode", "infer", "--precision", precision)
    assert rc == 0, err[-3000:]
    assert r["params"] == params and r["loss_last"] is None and r["compute_dtype"] == dtype
    assert r["throughput"] > 0
    if script == "bare_transformer.py":  # 2 sentences x 3 generated tokens per decode call
        assert r["unit"] == "generated tokens/s" and r["sentences"] == 2


def test_a_diverged_training_voids_its_figure_with_exit_code_3():
    rc, r, _ = bare("bare_ncf.py", *TINY, "--batch", "1000", "--lr", "1e38")
    assert rc == 3
    assert r["loss_finite"] is False and not math.isfinite(r["loss_last"])


def test_comma_lists_run_every_configuration_in_one_process():
    small = ["--batch", "500", "--users", "300", "--items", "200"]
    rc, results, err = bare_all(
        "bare_ncf.py", *TINY, *small, "--precision", "fp32,bf16", "--mode", "train,infer"
    )
    assert rc == 0, err[-3000:]
    got = [(r["precision"], r["mode"], r["compute_dtype"], r["loss_last"] is None) for r in results]
    assert got == [
        ("fp32", "train", "float32", False),
        ("fp32", "infer", "float32", True),
        ("bf16", "train", "bfloat16", False),
        ("bf16", "infer", "bfloat16", True),
    ]


def window_seconds(r: dict, units_per_step: int) -> list[float]:
    """Each timed window's length, from its rate and the steps it ran."""
    return [r["steps"] * units_per_step / rate for rate in r["all"]]


def test_min_window_s_stretches_every_window_of_every_configuration():
    """--min-window-s: untimed windows after the warm-up measure the step, and each configuration's windows
    then run enough steps to last about that long (the BARE line's steps says how many)."""
    small = ["--batch", "500", "--users", "300", "--items", "200", "--mode", "train,infer"]
    rc, results, err = bare_all("bare_ncf.py", *TINY, *small, "--min-window-s", "0.3")
    assert rc == 0, err[-3000:]
    assert [r["mode"] for r in results] == ["train", "infer"]
    for r in results:
        assert r["min_window_s"] == 0.3 and r["steps"] > 1
        assert all(s > 0.15 for s in window_seconds(r, 500)), (r["steps"], r["all"])


def refusal(*args: str) -> str:
    """bare_ncf.py's last stderr line for flags it must refuse: exit 2, no traceback."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "bare_ncf.py"), "--device", "cpu", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    return proc.stderr.splitlines()[-1]


def test_a_negative_min_window_s_is_refused_in_one_line():
    assert "--min-window-s -1: use seconds >= 0" in refusal("--min-window-s", "-1")


def test_an_unknown_precision_is_refused_in_one_line():
    assert "--precision fp16: choose from fp32, tf32, amp, bf16" in refusal("--precision", "amp,fp16")


def test_greedy_decoding_with_the_cache_equals_decoding_by_full_recomputation():
    """Each cached step must give the token the full (teacher-forced) decoder gives at that position, and a
    sentence gets PAD after its EOS (as in the harness's decoder); a wrong cache index or mask would change
    the work the yardstick times and the tokens it emits."""
    script = f"""
        import sys, torch
        sys.path.insert(0, {str(SCRIPTS)!r})
        import bare_transformer as bt
        torch.manual_seed(0)
        m = bt.Transformer(vocab=50, d=32, heads=4, d_ff=64, layers=2).eval()
        src = torch.randint(bt.FIRST_WORD, 50, (3, 7))
        src[0, 5:] = bt.PAD
        with torch.inference_mode():
            out = bt.greedy(m, src, 9, True, m.encode, m.decode_step)
            tgt_in = torch.cat([torch.full((3, 1), bt.BOS), out[:, :-1]], 1)
            full = m(src, tgt_in, True).argmax(-1)
        print("SAME", bool((out == full).all()), tuple(out.shape))
        # An EOS row like BOS's but longer: the (tied) network now ends sentences; PAD follows each EOS.
        m.embed.weight.data[bt.EOS] = 1.5 * m.embed.weight.data[bt.BOS]
        with torch.inference_mode():
            out = bt.greedy(m, src, 9, True, m.encode, m.decode_step)
        eos = out == bt.EOS
        ended = (eos.cumsum(1) - eos.int()) > 0  # after each sentence's first EOS
        print("PAD_AFTER_EOS", bool(eos.any()), bool((out[ended] == bt.PAD).all()), bool(ended.any()))
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "SAME True (3, 9)" in proc.stdout
    assert "PAD_AFTER_EOS True True True" in proc.stdout


def test_transformer_masks_every_batch_unless_told_auto():
    """The harness passes a key-padding mask on every batch; the yardstick does too by default (one
    attention kernel on both sides), and `--mask auto` keeps the old mask-only-with-padding loop."""
    fixed = ["--batch-tokens", "32", "--min-len", "16", "--max-len", "16"]
    for mask in ("always", "auto"):
        rc, r, err = bare("bare_transformer.py", *TINY, *fixed, *(["--mask", mask] if mask == "auto" else []))
        assert rc == 0, err[-3000:]
        assert r["mask"] == mask and math.isfinite(r["loss_last"])


def test_profile_records_one_window_after_the_timed_ones(tmp_path: Path) -> None:
    """--profile: the timed windows as without it, then one window under torch.profiler, its trace and its
    kernel summary written under DIR/<precision>_<mode>/ (a CPU run: host ops, no GPU kernels)."""
    rc, r, err = bare("bare_ncf.py", *TINY, "--batch", "1000", "--profile", str(tmp_path))
    assert rc == 0, err[-3000:]
    assert len(r["all"]) == 2 and r["profile"] == str(tmp_path)
    summary = json.loads((tmp_path / "fp32_train" / "profile.json").read_text())
    assert summary["steps"] == 1 and summary["kernels"] == [] and "no GPU kernels" in err
    with gzip.open(summary["trace"], "rt") as f:
        names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
    assert any(n.startswith("aten::embedding") for n in names), sorted(names)[:20]


def test_a_failed_profile_costs_one_line_not_the_figures(tmp_path: Path) -> None:
    """The profile is an extra: when its folder cannot be made, the loop says so in one line and still
    reports its timed windows."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    rc, r, err = bare("bare_ncf.py", *TINY, "--batch", "1000", "--profile", str(blocker / "prof"))
    assert rc == 0 and len(r["all"]) == 2 and r["throughput"] > 0
    (line,) = [x for x in err.splitlines() if x.startswith("--profile ")]
    assert "no profile of fp32 train: NotADirectoryError" in line
    assert "Traceback" not in err


def test_classification_loop_runs_on_the_cpu_and_profiles_one_repeat_after_the_timed_ones(
    tmp_path: Path,
) -> None:
    """bare_loop.py (the torchvision yardstick) on the CPU: its timed repeats as on a GPU, wall-clocked, then
    with --profile one repeat under torch.profiler, its trace and kernel summary under DIR/<precision>_<mode>/."""
    args = ["--device", "cpu", "--model", "resnet18", "--batch", "2", "--precision", "fp32"]
    rc, r, err = bare(
        "bare_loop.py", *args, "--warmup", "1", "--steps", "1", "--repeats", "2", "--profile", str(tmp_path)
    )
    assert rc == 0, err[-3000:]
    assert r["device"] == "cpu" and len(r["all"]) == 2 and r["samples_per_s"] > 0
    assert math.isfinite(r["loss_last"])
    summary = json.loads((tmp_path / "fp32_train" / "profile.json").read_text())
    assert summary["steps"] == 1 and summary["kernels"] == []
    with gzip.open(summary["trace"], "rt") as f:
        names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
    assert "aten::convolution_backward" in names, sorted(names)[:20]
