#!/usr/bin/env bash
# Store Z36, command 6: the harness job of torch.compile SSD300 training at fp32 alone, given the whole call, on the
# machine call5 left warm (its loop finished; its harness, given the 256 s left, was stopped in warm-up).
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh ssd_torchc_fp32_c "$(left)" +experiment=frameworks_gpu framework=torch execution=compiled mode=train \
  precision=fp32 model=ssd300
finish
