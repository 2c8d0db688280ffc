#!/usr/bin/env bash
# Store Z29, command 1 (JAX): Transformer-base and SSD300 training at fp32, tf32 and bf16 (the frameworks page
# has AMP only), jax.jit, each beside its plain Flax/Optax loop at the same precisions in the same command.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=fp32,tf32,bf16 mode=train framework=jax execution=compiled)
TB=(--device cuda --precision fp32,tf32,bf16 --mode train)
L=(--batch-tokens 40960 --min-len 64 --max-len 64)
sweep trp_jax 140 "${E[@]}" model=transformer
bare 110 python3 yardsticks/bare_jax_transformer.py "${TB[@]}" "${L[@]}"
sweep ssdp_jax 160 "${E[@]}" model=ssd300
bare 130 python3 yardsticks/bare_jax_ssd300.py "${TB[@]}" --batch 128 --steps 10 --windows 5
finish
