#!/usr/bin/env bash
# Store Z36, command 3: PyTorch torch.compile Transformer-base training at fp32, then tf32, each alone beside its
# plain loop compiled the same way.
. results/h200/commands_z24/lib.sh
wheels || exit 1
L=(--device cuda --mode train --batch-tokens 40960 --min-len 64 --max-len 64 --compile)
for p in fp32 tf32; do
  fresh trp_torchc_$p 150 +experiment=frameworks_gpu framework=torch execution=compiled mode=train precision=$p \
    model=transformer
  bare 120 python3 yardsticks/bare_transformer.py "${L[@]}" --precision $p
done
finish
