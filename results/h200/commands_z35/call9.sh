#!/usr/bin/env bash
# Store Z35, command 9: JAX (jax.jit) SSD300 training at tf32, then fp32, each alone beside its Flax loop.
. results/h200/commands_z24/lib.sh
wheels || exit 1
for p in tf32 fp32; do
  fresh ssd_jax_$p 110 +experiment=frameworks_gpu framework=jax execution=compiled mode=train precision=$p model=ssd300
  bare 90 python3 yardsticks/bare_jax_ssd300.py --device cuda --precision $p --mode train --batch 128 --steps 10 \
    --windows 5
done
finish
