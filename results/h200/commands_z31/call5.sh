#!/usr/bin/env bash
# Store Z31, command 5: JAX (jax.jit) training of Transformer-base at fp32, tf32 and bf16, beside its Flax loop.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu framework=jax execution=compiled mode=train precision=fp32,tf32,bf16)
sweep trp_jax 320 "${E[@]}" model=transformer
bare 220 python3 yardsticks/bare_jax_transformer.py --device cuda --precision fp32,tf32,bf16 --mode train \
  --batch-tokens 40960 --min-len 64 --max-len 64
finish
