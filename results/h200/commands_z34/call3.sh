#!/usr/bin/env bash
# Store Z34, command 3: the JAX Transformer-base tf32 training pair alternated (harness, plain loop, harness), after
# call5/call2 read the harness at 98.3% of the plain loop at tf32 (and 98.9% at fp32, 101.5% at bf16).
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu framework=jax execution=compiled mode=train precision=tf32 model=transformer)
fresh trt_jax_a 110 "${E[@]}"
bare 100 python3 yardsticks/bare_jax_transformer.py --device cuda --precision tf32 --mode train \
  --batch-tokens 40960 --min-len 64 --max-len 64
fresh trt_jax_b 110 "${E[@]}"
finish
