#!/usr/bin/env bash
# Store Z34, command 2: the Flax Transformer-base plain loop at tf32 and bf16, training (commands_z31's call5 ran
# its harness sweep at three precisions but its plain loop reached only fp32 within the cap).
. results/h200/commands_z24/lib.sh
wheels || exit 1
bare 300 python3 yardsticks/bare_jax_transformer.py --device cuda --precision tf32,bf16 --mode train \
  --batch-tokens 40960 --min-len 64 --max-len 64
finish
