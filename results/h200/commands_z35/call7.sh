#!/usr/bin/env bash
# Store Z35, command 7: PyTorch eager SSD300 training at tf32 alone beside its plain loop (call4's two precisions
# need more than one call once each first step runs cuDNN's benchmark for minutes).
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh ssd_torche_tf32 260 +experiment=frameworks_gpu framework=torch execution=eager mode=train precision=tf32 model=ssd300
bare 200 python3 yardsticks/bare_ssd300.py --device cuda --precision tf32 --mode train --batch 128 --steps 10 \
  --windows 5
finish
