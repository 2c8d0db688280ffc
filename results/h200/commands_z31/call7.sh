#!/usr/bin/env bash
# Store Z31, command 7: PyTorch eager training of SSD300 and Transformer-base at fp32, tf32 and bf16, each beside its
# plain loop at the same precisions.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu framework=torch execution=eager mode=train precision=fp32,tf32,bf16)
TB=(--device cuda --precision fp32,tf32,bf16 --mode train)
sweep ssdp_torche 170 "${E[@]}" model=ssd300
bare 100 python3 yardsticks/bare_ssd300.py "${TB[@]}" --batch 128 --steps 10 --windows 5
sweep trp_torche 160 "${E[@]}" model=transformer
bare 100 python3 yardsticks/bare_transformer.py "${TB[@]}" --batch-tokens 40960 --min-len 64 --max-len 64
finish
