#!/usr/bin/env bash
# Store Z35, command 4: PyTorch eager SSD300 training at tf32 and bf16 beside its plain loop.
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh ssd_torche 300 +experiment=frameworks_gpu framework=torch execution=eager mode=train precision=tf32,bf16 model=ssd300
bare 250 python3 yardsticks/bare_ssd300.py --device cuda --precision tf32,bf16 --mode train --batch 128 --steps 10 \
  --windows 5
finish
