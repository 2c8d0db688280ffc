#!/usr/bin/env bash
# Store Z28, command 3 (PyTorch, JAX): the torch.compile SSD300 yardstick (its harness cell is store Z25's);
# Transformer greedy decoding (mode=infer): JAX in one jitted call per batch (model.decode_loop=device) and
# PyTorch eager, each beside its plain loop.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=amp)
TB=(--device cuda --precision amp)
L=(--batch-tokens 40960 --min-len 64 --max-len 64 --mode infer --warmup 5 --steps 5 --windows 5)
bare 120 python3 yardsticks/bare_ssd300.py "${TB[@]}" --batch 128 --mode train --steps 10 --windows 5 --compile
sweep dec_jax 110 "${E[@]}" model=transformer mode=infer framework=jax execution=compiled model.decode_loop=device
bare 90 python3 yardsticks/bare_jax_transformer.py "${TB[@]}" "${L[@]}" --loop device
sweep dec_torch 90 "${E[@]}" model=transformer mode=infer framework=torch execution=eager
bare 70 python3 yardsticks/bare_transformer.py "${TB[@]}" "${L[@]}"
finish
