#!/usr/bin/env bash
# Store Z36, command 2: PyTorch torch.compile SSD300 training at tf32, then bf16, each alone beside its compiled
# plain loop (a process per precision, as the harness runs a job).
. results/h200/commands_z24/lib.sh
wheels || exit 1
for p in tf32 bf16; do
  fresh ssd_torchc_$p 150 +experiment=frameworks_gpu framework=torch execution=compiled mode=train precision=$p \
    model=ssd300
  bare 120 python3 yardsticks/bare_ssd300.py --device cuda --precision $p --mode train --batch 128 --steps 10 \
    --windows 5 --compile
done
finish
