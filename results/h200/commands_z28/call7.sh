#!/usr/bin/env bash
# Store Z28, command 7 (PyTorch, JAX): NCF training and inference at fp32, tf32 and bf16 (the frameworks page
# has AMP only), torch.compile and jax.jit, each beside its plain loop at the same precisions.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=fp32,tf32,bf16 model=ncf mode=train,infer)
TB=(--device cuda --precision fp32,tf32,bf16 --batch 1048576 --mode train,infer --steps 50 --windows 5)
sweep ncfp_torch 200 "${E[@]}" framework=torch execution=compiled
bare 90 python3 yardsticks/bare_ncf.py "${TB[@]}" --compile
sweep ncfp_jax 110 "${E[@]}" framework=jax execution=compiled
bare 60 python3 yardsticks/bare_jax_ncf.py "${TB[@]}"
finish
