#!/usr/bin/env bash
# Store Z37, command 1: JAX Transformer-base training with the step's key from threefry (framework.prng), at fp32,
# tf32 and bf16, then the Flax loop with threefry at tf32 and bf16, a process each.
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh trp_jax_threefry 300 +experiment=frameworks_gpu framework=jax execution=compiled mode=train \
  precision=fp32,tf32,bf16 model=transformer framework.prng=threefry2x32
L=(--device cuda --mode train --batch-tokens 40960 --min-len 64 --max-len 64 --prng threefry2x32)
bare 120 python3 yardsticks/bare_jax_transformer.py "${L[@]}" --precision tf32
bare 120 python3 yardsticks/bare_jax_transformer.py "${L[@]}" --precision bf16
finish
