#!/usr/bin/env bash
# Store Z35, command 6: PyTorch eager SSD300 training at bf16 alone beside its plain loop (call4's two precisions
# need more than one call once each first step runs cuDNN's benchmark for minutes).
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh ssd_torche_bf16 280 +experiment=frameworks_gpu framework=torch execution=eager mode=train precision=bf16 model=ssd300
bare 230 python3 yardsticks/bare_ssd300.py --device cuda --precision bf16 --mode train --batch 128 --steps 10 \
  --windows 5
finish
