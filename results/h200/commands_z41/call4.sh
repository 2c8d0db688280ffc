#!/usr/bin/env bash
# Store Z41, command 4: JAX (jax.jit) SSD300 training at fp32 beside its Flax loop (the torch.compile side at fp32
# needs about 270 s on an H100, more than what was left of the command). TAG, if set, suffixes the sweep's name
# (call6 runs this with another allocator setting).
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh "ssd_jax_fp32${TAG:-}" 130 +experiment=frameworks_gpu execution=compiled mode=train model=ssd300 precision=fp32 framework=jax
bare 120 python3 yardsticks/bare_jax_ssd300.py --device cuda --precision fp32 --mode train --batch 128 --steps 10 \
  --windows 5 --min-window-s 2
finish
