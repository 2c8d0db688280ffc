#!/usr/bin/env bash
# Store Z35, command 8: JAX (jax.jit) SSD300 training at bf16 alone beside its Flax loop, to fit what one call has left.
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh ssd_jax_bf16 230 +experiment=frameworks_gpu framework=jax execution=compiled mode=train precision=bf16 model=ssd300
bare 190 python3 yardsticks/bare_jax_ssd300.py --device cuda --precision bf16 --mode train --batch 128 --steps 10 \
  --windows 5
finish
