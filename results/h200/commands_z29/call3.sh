#!/usr/bin/env bash
# Store Z29, command 3 (PyTorch): SSD300 training at fp32, tf32 and bf16 with torch.compile and eager, beside
# the plain loop each way; then Transformer-base training in eager mode the same way.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=fp32,tf32,bf16 mode=train framework=torch)
TB=(--device cuda --precision fp32,tf32,bf16 --mode train)
L=(--batch-tokens 40960 --min-len 64 --max-len 64)
sweep ssdp_torch 200 "${E[@]}" model=ssd300 execution=eager,compiled
bare 60 python3 yardsticks/bare_ssd300.py "${TB[@]}" --batch 128 --steps 10 --windows 5
bare 150 python3 yardsticks/bare_ssd300.py "${TB[@]}" --batch 128 --steps 10 --windows 5 --compile
sweep trp_torche 70 "${E[@]}" model=transformer execution=eager
bare 60 python3 yardsticks/bare_transformer.py "${TB[@]}" "${L[@]}"
finish
