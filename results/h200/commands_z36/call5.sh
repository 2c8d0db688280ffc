#!/usr/bin/env bash
# Store Z36, command 5: the plain loop of torch.compile SSD300 training at fp32 first, then the harness job, each
# given 290 s: on an H100 call1's harness spent 200 s in its first step and 50 s in the other 19 warm-up steps, and
# the loop, given the 230 s left after it, printed nothing. Run with BUDGET=590 and a 600-s call.
. results/h200/commands_z24/lib.sh
wheels || exit 1
bare 290 python3 yardsticks/bare_ssd300.py --device cuda --precision fp32 --mode train --batch 128 --steps 10 \
  --windows 5 --compile
fresh ssd_torchc_fp32_b 290 +experiment=frameworks_gpu framework=torch execution=compiled mode=train precision=fp32 \
  model=ssd300
finish
