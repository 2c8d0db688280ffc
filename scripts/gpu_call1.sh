#!/usr/bin/env bash
# H200 run, part 1: the PyTorch synthetic matrix (ResNet-50) and torch.compile, with the bare loop
# before and after. Run on the device machine from the repo root; results land in $OUT.
set -u
out=${OUT:-/tmp/out}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
common=(framework=torch device=cuda schedule.batch_size=256 schedule.warmup_steps=15
        schedule.steps_per_window=10 schedule.windows=8 report.enabled=false
        "tracking.uri=sqlite:///$out/mlflow.db")
bare() { python3 scripts/bare_loop.py --batch 256 --steps 80 --repeats 3 "$@" | tee -a "$out/bare.jsonl"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
bare --precision amp
python3 src/run.py -m "${common[@]}" model=resnet50 precision=amp,bf16,tf32,fp32 mode=train,infer \
  hydra.sweep.dir=/tmp/sweep1 2>&1 | grep -vE "warm-up step|window [0-9]" | tee "$out/sweep1.log"
bare --precision amp
bare --precision amp --compile
python3 src/run.py -m "${common[@]}" model=resnet50 precision=amp mode=train framework.compile=true \
  hydra.sweep.dir=/tmp/sweep2 2>&1 | grep -vE "warm-up step|window [0-9]" | tee "$out/sweep2.log"
tar czf "$out/artifacts1.tgz" -C "$out" mlartifacts 2>/dev/null; rm -rf "$out/mlartifacts"
