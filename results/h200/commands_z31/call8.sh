#!/usr/bin/env bash
# Store Z31, command 8: PyTorch torch.compile (default mode) training of SSD300 at fp32, tf32 and bf16, beside its plain
# loop compiled the same way.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu framework=torch execution=compiled mode=train precision=fp32,tf32,bf16)
sweep ssdp_torchc 290 "${E[@]}" model=ssd300
bare 250 python3 yardsticks/bare_ssd300.py --device cuda --precision fp32,tf32,bf16 --mode train --batch 128 \
  --steps 10 --windows 5 --compile
finish
