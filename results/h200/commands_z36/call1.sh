#!/usr/bin/env bash
# Store Z36, command 1: PyTorch torch.compile (default mode) SSD300 training at fp32 alone beside its plain loop
# compiled the same way; PyTorch eager's first fp32 step ran cuDNN's benchmark for 150 s on an H200, so the two
# sides get the whole call.
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh ssd_torchc_fp32 320 +experiment=frameworks_gpu framework=torch execution=compiled mode=train precision=fp32 \
  model=ssd300
bare 230 python3 yardsticks/bare_ssd300.py --device cuda --precision fp32 --mode train --batch 128 --steps 10 \
  --windows 5 --compile
finish
