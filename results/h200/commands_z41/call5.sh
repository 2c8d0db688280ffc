#!/usr/bin/env bash
# Store Z41, command 5: call4 again with XLA's allocator allowed 90% of the GPU's memory instead of its default 75%
# (XLA_CLIENT_MEM_FRACTION=0.9): JAX SSD300 training at fp32, batch 128, the harness job then its Flax loop.
. results/h200/commands_z24/lib.sh
wheels || exit 1
export XLA_CLIENT_MEM_FRACTION=0.9
fresh ssd_jax_fp32_mf90 120 +experiment=frameworks_gpu execution=compiled mode=train model=ssd300 precision=fp32 \
  framework=jax
bare 100 python3 yardsticks/bare_jax_ssd300.py --device cuda --precision fp32 --mode train --batch 128 --steps 10 \
  --windows 5 --min-window-s 2
finish
