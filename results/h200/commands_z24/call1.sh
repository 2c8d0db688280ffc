#!/usr/bin/env bash
# call 1: deps, TF part 0, torch and JAX sweeps + yardsticks for NCF, Transformer, SSD300 (amp)
. results/h200/commands_z24/lib.sh
wheels || exit 1
keep_parts
E=(+experiment=frameworks_gpu precision=amp)
TB=(--device cuda --precision amp)
sweep ncf_torch 150 "${E[@]}" model=ncf mode=train,infer framework=torch execution=eager,compiled
sweep ncf_jax 80 "${E[@]}" model=ncf mode=train,infer framework=jax execution=compiled
bare 40 python3 yardsticks/bare_ncf.py "${TB[@]}" --batch 1048576 --mode train,infer --steps 50 --windows 5
bare 60 python3 yardsticks/bare_ncf.py "${TB[@]}" --batch 1048576 --mode train,infer --steps 50 --windows 5 --compile
bare 40 python3 yardsticks/bare_jax_ncf.py "${TB[@]}" --batch 1048576 --mode train,infer --steps 50 --windows 5
L=(--batch-tokens 40960 --min-len 64 --max-len 64)
sweep tr_torch 200 "${E[@]}" model=transformer mode=train framework=torch execution=eager,compiled
sweep tr_jax 100 "${E[@]}" model=transformer mode=train framework=jax execution=compiled
bare 60 python3 yardsticks/bare_transformer.py "${TB[@]}" "${L[@]}" --mode train
bare 100 python3 yardsticks/bare_transformer.py "${TB[@]}" "${L[@]}" --mode train --compile
bare 80 python3 yardsticks/bare_jax_transformer.py "${TB[@]}" "${L[@]}" --mode train
finish
