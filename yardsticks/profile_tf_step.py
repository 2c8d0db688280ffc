#!/usr/bin/env python
"""Profile one TensorFlow train step (graph mode or XLA) and say where the time goes.

Self-contained (imports nothing from dlbench): builds Keras ResNet-50 (or a tiny 2-conv model), keeps one
synthetic batch on the device, warms a tf.function train step up, profiles ``--steps`` steps with
tf.profiler, then parses the written XSpace (``*.xplane.pb``) with the protobuf module TF ships (no
tensorboard needed) and prints one ``PROFILE {json}`` line plus a short table:

* GPU planes: kernel time by kernel name and by category, GPU busy time (union of kernel intervals) per
  step against wall time per step (kernel_table.py: the categories the torch and JAX yardsticks' --profile
  tables use).
* Host plane: TF op / executor events by name and by op type, host thread busy time.

    python yardsticks/profile_tf_step.py            # graph mode (tf.function)
    python yardsticks/profile_tf_step.py --xla      # tf.function(jit_compile=True)
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import importlib
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

from kernel_table import kernel_lines, summarize, union_ns

XPLANE_MODULES = (
    "tensorflow.tsl.profiler.protobuf.xplane_pb2",  # TF 2.21 wheels
    "tsl.profiler.protobuf.xplane_pb2",
    "xla.tsl.profiler.protobuf.xplane_pb2",
    "tensorflow.core.profiler.protobuf.xplane_pb2",
    "tensorboard_plugin_profile.protobuf.xplane_pb2",
)

# ----------------------------------------------------------------------------------------------- model


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--xla", action="store_true", help="tf.function(jit_compile=True)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--precision", choices=("amp", "fp32", "bf16"), default="amp")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--model", choices=("resnet50", "tiny"), default="resnet50")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--out", default=None, help="output folder (default: tf_profile_<graph|xla>_<precision>)")
    return p.parse_args(argv)


def select_device(tf, want: str) -> str:
    if want == "cpu":
        try:
            tf.config.set_visible_devices([], "GPU")
        except (RuntimeError, ValueError) as exc:  # already initialized: pinning below still applies
            print(f"note: could not hide GPUs ({exc})", file=sys.stderr)
        return "/CPU:0"
    gpus = tf.config.list_physical_devices("GPU")
    if want == "cuda" and not gpus:
        sys.exit("error: --device cuda but TensorFlow sees no GPU")
    if gpus:
        for g in gpus:
            with contextlib.suppress(RuntimeError, ValueError):
                tf.config.experimental.set_memory_growth(g, True)
        return "/GPU:0"
    return "/CPU:0"


def build(args, tf, keras, device: str):
    on_gpu = device.startswith("/GPU")
    policy = {
        "fp32": "float32",
        "bf16": "mixed_bfloat16",
        "amp": "mixed_float16" if on_gpu else "mixed_bfloat16",
    }
    policy = policy[args.precision]
    keras.mixed_precision.set_global_policy(policy)
    shape = (args.image_size, args.image_size, 3)
    with tf.device(device):
        if args.model == "resnet50":
            model = keras.applications.ResNet50(
                weights=None, input_shape=shape, classes=args.classes, classifier_activation=None
            )
        else:
            model = keras.Sequential(
                [
                    keras.Input(shape),
                    keras.layers.Conv2D(16, 3, padding="same", use_bias=False),
                    keras.layers.BatchNormalization(),
                    keras.layers.ReLU(),
                    keras.layers.Conv2D(32, 3, strides=2, padding="same"),
                    keras.layers.ReLU(),
                    keras.layers.GlobalAveragePooling2D(),
                    keras.layers.Dense(args.classes),
                ]
            )
        opt = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
        loss_scaled = policy == "mixed_float16"
        if loss_scaled:
            opt = keras.optimizers.LossScaleOptimizer(opt)
        opt.build(model.trainable_variables)
        x = tf.random.uniform((args.batch, *shape), dtype=tf.float32)
        y = tf.random.uniform((args.batch,), maxval=args.classes, dtype=tf.int32)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    variables = model.trainable_variables

    @tf.function(jit_compile=args.xla)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, tf.cast(logits, tf.float32))
            scaled = opt.scale_loss(loss) if loss_scaled else loss
        grads = tape.gradient(scaled, variables)
        opt.apply(grads, variables)
        return loss

    return policy, train_step, x, y


# ---------------------------------------------------------------------------------------------- xplane


def load_xplane_module():
    errors = []
    for name in XPLANE_MODULES:
        try:
            return importlib.import_module(name), name
        except Exception as exc:  # noqa: BLE001 - any import failure means: try the next path
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
    return None, "; ".join(errors)


def events(plane, lines):
    """(name, display name, start_ns, dur_ns, occurrences) for every event of the given lines of a plane.

    Host TF op events are named '<op name>:<op type>' with the op type as display name; GPU kernels carry
    their demangled name as display name where the tracer set one."""
    meta = plane.event_metadata
    for line in lines:
        for ev in line.events:
            md = meta.get(ev.metadata_id)
            name = md.name if md is not None else str(ev.metadata_id)
            shown = (md.display_name or name) if md is not None else name
            if ev.WhichOneof("data") == "num_occurrences":
                yield name, shown, None, ev.duration_ps / 1e3, ev.num_occurrences
            else:
                yield name, shown, line.timestamp_ns + ev.offset_ps / 1e3, ev.duration_ps / 1e3, 1


def gpu_summary(plane, steps: int) -> dict:
    """kernel_table.summarize over the plane's kernel lines (kernel_table.kernel_lines), with the plane's name
    and each line's event count."""
    keep = kernel_lines({i: ln.display_name or ln.name for i, ln in enumerate(plane.lines)})
    lines = [ln for i, ln in enumerate(plane.lines) if i in keep]
    found = ((shown, start, dur, n) for _, shown, start, dur, n in events(plane, lines))
    return {
        "plane": plane.name,
        "lines": {ln.display_name or ln.name: len(ln.events) for ln in lines},
        **summarize(found, steps),
    }


def host_summary(plane, steps: int) -> dict:
    """TF ops (events whose metadata names an op type: '<op name>:<op type>') apart from the runtime's own
    events (executor, eager, XLA launch: inclusive, so nested ones overlap)."""
    by_event: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_op: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_type: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    threads = {}
    for ln in plane.lines:
        intervals = []
        for name, shown, start, dur, n in events(plane, [ln]):
            for d, k in ((by_event, name), (by_op, name), (by_type, shown)):
                if d is by_event or shown != name:
                    d[k][0] += dur
                    d[k][1] += n
            if start is not None:
                intervals.append((start, start + dur))
        if intervals:
            threads[ln.display_name or ln.name or str(ln.id)] = union_ns(intervals) * 1e-6 / steps
    ms = 1e-6 / steps

    def top(d, n):
        items = sorted(d.items(), key=lambda kv: -kv[1][0])[:n]
        return [[k[:80], round(v * ms, 4), round(c / steps, 2)] for k, (v, c) in items]

    busiest = sorted(threads.items(), key=lambda kv: -kv[1])
    return {
        "plane": plane.name,
        "thread_busy_ms_per_step_sum": round(sum(threads.values()), 3),
        "busiest_threads": [[k[:60], round(v, 3)] for k, v in busiest[:8]],
        "threads": len(threads),
        "tf_ops_per_step": sum(c for _, c in by_op.values()) / steps,
        "tf_op_ms_per_step": round(sum(v for v, _ in by_op.values()) * ms, 3),
        "top_ops": top(by_op, 40),
        "top_op_types": top(by_type, 25),
        "top_events": top(by_event, 40),
    }


def parse_xspace(logdir: Path, steps: int) -> dict:
    files = sorted(glob.glob(str(logdir / "plugins" / "profile" / "*" / "*.xplane.pb")), key=os.path.getmtime)
    if not files:
        return {"error": f"no *.xplane.pb under {logdir}/plugins/profile/*/"}
    out: dict = {"xplane_path": files[-1]}
    mod, how = load_xplane_module()
    if mod is None:
        out["error"] = f"cannot parse the xplane: no xplane_pb2 module importable ({how})"
        return out
    out["xplane_module"] = how
    space = mod.XSpace()
    with open(files[-1], "rb") as f:
        space.ParseFromString(f.read())
    out["planes"] = [p.name for p in space.planes]
    out["gpu"] = [gpu_summary(p, steps) for p in space.planes if p.name.startswith("/device:GPU:")]
    hosts = [p for p in space.planes if p.name == "/host:CPU"]
    out["host"] = host_summary(hosts[0], steps) if hosts else None
    out["xspace_errors"] = list(space.errors)
    return out


# ------------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    import keras
    import tensorflow as tf

    device = select_device(tf, args.device)
    mode = "xla" if args.xla else "graph"
    out_dir = Path(args.out or f"tf_profile_{mode}_{args.precision}")
    logdir = out_dir / "logdir"
    out_dir.mkdir(parents=True, exist_ok=True)

    policy, train_step, x, y = build(args, tf, keras, device)
    sync = tf.test.experimental.sync_devices
    t0 = time.perf_counter()
    with tf.device(device):
        for _ in range(max(args.warmup, 1)):  # the first call traces (and, with --xla, compiles)
            train_step(x, y)
        sync()
        warm_s = time.perf_counter() - t0
        tf.profiler.experimental.start(str(logdir))  # host tracer level 2, device tracer on
        t1 = time.perf_counter()
        for i in range(args.steps):
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                loss = train_step(x, y)
        sync()
        wall = time.perf_counter() - t1
        tf.profiler.experimental.stop()

    wall_ms = wall * 1e3 / args.steps
    parsed = parse_xspace(logdir, args.steps)
    gpus = parsed.get("gpu") or []
    host = parsed.get("host") or {}
    g = gpus[0] if gpus else None
    summary = {
        "xla": args.xla,
        "precision": args.precision,
        "policy": policy,
        "model": args.model,
        "batch": args.batch,
        "image_size": args.image_size,
        "device": device,
        "tf": tf.__version__,
        "steps": args.steps,
        "wall_ms_per_step": round(wall_ms, 3),
        "img_per_s": round(args.batch / (wall_ms / 1e3), 1),
        "gpu_busy_ms_per_step": round(g["busy_ms_per_step"], 3) if g else None,
        "gpu_busy_frac": round(g["busy_ms_per_step"] / wall_ms, 4) if g else None,
        "kernels_per_step": g["kernels_per_step"] if g else None,
        "by_category": g["by_category"] if g else {},
        "top_kernels": [k[:3] for k in g["kernels"][:12]] if g else [],
        "top_host_ops": host.get("top_ops", [])[:10],
        "top_host_op_types": host.get("top_op_types", [])[:10],
        "top_host_events": host.get("top_events", [])[:10],
        "host_tf_ops_per_step": host.get("tf_ops_per_step"),
        "host_tf_op_ms_per_step": host.get("tf_op_ms_per_step"),
        "host_thread_busy_ms_per_step": host.get("thread_busy_ms_per_step_sum"),
        "warmup_s": round(warm_s, 2),
        "loss": float(loss),
    }
    if not g:
        summary["note"] = "no GPU plane"
        if device.startswith("/GPU"):  # the device tracer (CUPTI) recorded nothing
            summary["note"] += " (ran on a GPU, yet no kernels were traced: is libcupti loadable?)"
    if parsed.get("xspace_errors"):
        summary["xspace_errors"] = parsed["xspace_errors"][:5]
    if "error" in parsed:
        summary["error"] = parsed["error"]
    summary["xplane_path"] = parsed.get("xplane_path")
    print("PROFILE " + json.dumps(summary, separators=(",", ":")), flush=True)

    full = {"summary": summary, "args": vars(args), **parsed}
    (out_dir / "summary.json").write_text(json.dumps(full, indent=1))
    (out_dir / "xplane_path.txt").write_text(str(parsed.get("xplane_path")) + "\n")
    print_table(summary, full, out_dir)
    return 0


def print_table(s: dict, full: dict, out_dir: Path) -> None:
    mode = "XLA" if s["xla"] else "graph"
    print(f"\n== {mode} {s['policy']} batch {s['batch']} {s['image_size']}px on {s['device']} (TF {s['tf']})")
    print(f"wall {s['wall_ms_per_step']:.2f} ms/step ({s['img_per_s']:.0f} img/s)", end="")
    if s["gpu_busy_ms_per_step"] is not None:
        idle = s["wall_ms_per_step"] - s["gpu_busy_ms_per_step"]
        print(
            f"; GPU busy {s['gpu_busy_ms_per_step']:.2f} ms/step ({100 * s['gpu_busy_frac']:.0f}%),"
            f" GPU idle {idle:.2f} ms/step; {s['kernels_per_step']:.0f} kernels/step"
        )
        print(f"{'category':<20}{'ms/step':>10}{'% of busy':>11}")
        busy = sum(s["by_category"].values()) or 1.0
        for k, v in s["by_category"].items():
            print(f"{k:<20}{v:>10.3f}{100 * v / busy:>10.1f}%")
        print(f"\n{'top kernels':<82}{'ms/step':>9}{'n/step':>8}")
        for name, ms, n in s["top_kernels"]:
            print(f"{name[:80]:<82}{ms:>9.3f}{n:>8.1f}")
    else:
        print(f"; {s.get('note', '')}")
    host = full.get("host") or {}
    if host:
        print(
            f"\nhost: {host['threads']} threads, busy {host['thread_busy_ms_per_step_sum']:.2f} ms/step summed;"
            f" busiest {host['busiest_threads'][:3]}"
        )
        print(
            f"host TF ops: {s['host_tf_ops_per_step']:.0f} per step, {s['host_tf_op_ms_per_step']:.2f} ms/step summed"
        )
        for title, key in (
            ("host runtime events (inclusive, nested)", "top_host_events"),
            ("host TF op types", "top_host_op_types"),
            ("host TF ops", "top_host_ops"),
        ):
            print(f"{title:<82}{'ms/step':>9}{'n/step':>8}")
            for name, ms, n in s[key]:
                print(f"{name[:80]:<82}{ms:>9.3f}{n:>8.1f}")
    if "error" in s:
        print(f"\nERROR: {s['error']}")
    print(f"\nfull summary: {out_dir / 'summary.json'}")
    print(f"xplane: {s['xplane_path']}")


if __name__ == "__main__":
    sys.exit(main())
