#!/usr/bin/env bash
# Store Z34, command 1: PyTorch eager training of SSD300 at fp32, tf32 and bf16 beside its plain loop at the same
# precisions (the first half of commands_z31's call7; its Transformer-base half is store Z32).
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu framework=torch execution=eager mode=train precision=fp32,tf32,bf16)
sweep ssdp_torche 170 "${E[@]}" model=ssd300
bare 100 python3 yardsticks/bare_ssd300.py --device cuda --precision fp32,tf32,bf16 --mode train --batch 128 \
  --steps 10 --windows 5
finish
