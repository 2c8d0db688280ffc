#!/usr/bin/env bash
# Store Z35, command 1: JAX (jax.jit) Transformer-base training at fp32, tf32 and bf16 beside its Flax loop, both
# drawing dropout from XLA's RngBitGenerator (rbg); the harness job records it as run.prng.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu framework=jax execution=compiled mode=train precision=fp32,tf32,bf16 model=transformer)
fresh trp_jax_rbg 300 "${E[@]}"
bare 250 python3 yardsticks/bare_jax_transformer.py --device cuda --precision fp32,tf32,bf16 --mode train \
  --batch-tokens 40960 --min-len 64 --max-len 64 --prng rbg
finish
