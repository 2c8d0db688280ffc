"""The yardstick: the training loop a careful engineer writes by hand, with no harness around it.

torchvision model, channels_last, one synthetic batch made on the GPU, AMP (autocast + GradScaler) or
bf16 autocast, SGD with momentum (fused: one kernel, and no host sync for GradScaler's overflow check),
CUDA events around the timed steps. Prints samples/s. It imports
nothing from dlbench on purpose: dlbench's own figure for the same job must come within 1% of it, and
both must run in the same command (same GPU state, same clocks). With --profile DIR, one more repeat runs
under torch.profiler after the timed ones, and its GPU time by kernel category is printed (kernel_table.py).

Usage: python yardsticks/bare_loop.py [--model resnet50] [--batch 64] [--precision amp|bf16|fp32|tf32]
       [--mode train|infer] [--warmup 20] [--steps 200] [--repeats 3] [--min-window-s 0]
       [--optimizer fused|foreach] [--device cuda|cpu] [--profile DIR]
       [--compile [--compile-mode default|reduce-overhead|max-autotune|max-autotune-no-cudagraphs]]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics

import bare_cli
import bare_common
import torch
import torchvision


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--precision", default="amp", choices=["amp", "bf16", "fp32", "tf32"])
    p.add_argument("--mode", default="train", choices=["train", "infer"])
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--min-window-s",
        type=float,
        default=0.0,
        help="stretch each repeat to at least this many seconds (0: --steps as given), measured by untimed "
        "repeats after the warm-up: a repeat's edges cost a fixed time, so short repeats read low",
    )
    p.add_argument("--optimizer", default="fused", choices=["fused", "foreach"])
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-mode", default="default")
    p.add_argument(
        "--device", default="cuda", choices=["cuda", "cpu"], help="cpu: the same loop, wall-clocked"
    )
    bare_cli.profile_flag(p)
    a = p.parse_args()
    if a.min_window_s < 0:
        p.error(f"--min-window-s {a.min_window_s:g}: use seconds >= 0 (0 times --steps as given)")

    dev = torch.device(a.device)
    torch.backends.cudnn.benchmark = True
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    dtype = {"amp": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    model = getattr(torchvision.models, a.model)(weights=None).to(dev, memory_format=torch.channels_last)
    model.train(a.mode == "train")
    run = torch.compile(model, mode=a.compile_mode) if a.compile else model
    x = torch.randn(a.batch, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    fused = a.optimizer == "fused"
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=fused, foreach=not fused or None)
    if fused:  # torch's fused SGD fills a missing buffer from inf grads on a skipped step: start at zero
        for p_ in model.parameters():
            opt.state[p_]["momentum_buffer"] = torch.zeros_like(p_)
    scaler = torch.amp.GradScaler(dev.type) if dtype == torch.float16 else None
    loss_fn = torch.nn.CrossEntropyLoss()

    def autocast():
        return torch.autocast(dev.type, dtype=dtype) if dtype else contextlib.nullcontext()

    def step() -> torch.Tensor | None:
        if a.mode == "infer":
            with torch.inference_mode(), autocast():
                run(x)
            return None
        with autocast():
            loss = loss_fn(run(x), y)
        opt.zero_grad(set_to_none=True)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss.detach()

    def repeat() -> tuple[float, torch.Tensor | None]:
        """`a.steps` steps between two CUDA events (on the CPU, the wall clock): (seconds, the last loss)."""
        with bare_common.clock(dev) as seconds:
            for _ in range(a.steps):
                loss = step()
        return seconds(), loss

    for _ in range(a.warmup):
        step()
    bare_cli.stretch(a, lambda: repeat()[0])  # --min-window-s, as every yardstick takes it
    rates = []
    for _ in range(a.repeats):
        seconds, loss = repeat()
        rates.append(a.steps * a.batch / seconds)
    if a.profile:  # after the timed repeats, so that the profiler's cost touches no figure
        bare_cli.profile_window(a, repeat, bare_common.profiler)
    result = {**vars(a), "samples_per_s": statistics.median(rates), "all": rates, "torch": torch.__version__}
    result["loss_last"] = None if loss is None else float(loss)  # a NaN here voids the figure
    print("BARE " + json.dumps(result))


if __name__ == "__main__":
    main()
