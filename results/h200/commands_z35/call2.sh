#!/usr/bin/env bash
# Store Z35, command 2: the Flax Transformer-base loop at fp32, tf32 and bf16 with JAX's default threefry key
# (what the JAX yardsticks used before they drew from rbg), beside one more rbg process: the generator's cost.
. results/h200/commands_z24/lib.sh
wheels || exit 1
L=(--device cuda --precision fp32,tf32,bf16 --mode train --batch-tokens 40960 --min-len 64 --max-len 64)
bare 250 python3 yardsticks/bare_jax_transformer.py "${L[@]}" --prng threefry2x32
bare 250 python3 yardsticks/bare_jax_transformer.py "${L[@]}" --prng rbg
finish
