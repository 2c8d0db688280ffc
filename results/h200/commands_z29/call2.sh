#!/usr/bin/env bash
# Store Z29, command 2 (PyTorch): Transformer-base training at fp32, tf32 and bf16 with torch.compile beside its
# plain loop compiled the same way (each side compiles three times: the longest of these commands).
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=fp32,tf32,bf16 mode=train framework=torch execution=compiled)
TB=(--device cuda --precision fp32,tf32,bf16 --mode train)
L=(--batch-tokens 40960 --min-len 64 --max-len 64)
sweep trp_torchc 270 "${E[@]}" model=transformer
bare 270 python3 yardsticks/bare_transformer.py "${TB[@]}" "${L[@]}" --compile
finish
