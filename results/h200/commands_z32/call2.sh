#!/usr/bin/env bash
# Store Z32, command 2 (about 110 s, after call1 on one machine): PyTorch eager training of
# Transformer-base at tf32 and bf16 beside its plain loop, two cells of commands_z31's call7; its log also shows the
# min_timed_s probe as it now runs (the gap between "warm-up step 20/20" and the first window).
. results/h200/commands_z24/lib.sh
wheels || exit 1
sweep trp_torche 75 +experiment=frameworks_gpu framework=torch execution=eager mode=train precision=tf32,bf16 model=transformer
bare 40 python3 yardsticks/bare_transformer.py --device cuda --precision tf32,bf16 --mode train --batch-tokens 40960 \
  --min-len 64 --max-len 64 --warmup 5 --steps 5 --windows 5
grep -h "warm-up step 20/20\|steps per window\|window 1/" "$W/logs/trp_torche.log" | cut -c1-160
finish
