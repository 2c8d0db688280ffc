#!/usr/bin/env bash
# Store Z31, command 6: JAX (jax.jit) training of SSD300 at fp32, tf32 and bf16, beside its Flax loop.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu framework=jax execution=compiled mode=train precision=fp32,tf32,bf16)
sweep ssdp_jax 320 "${E[@]}" model=ssd300
bare 220 python3 yardsticks/bare_jax_ssd300.py --device cuda --precision fp32,tf32,bf16 --mode train --batch 128 \
  --steps 10 --windows 5
finish
