#!/usr/bin/env bash
# Store Z27, command 10 (PyTorch, after call9): the eager decoding yardstick with 3x longer windows (15 batches
# each), to see whether its 5-batch windows explain its spread and its place below the harness.
. results/h200/commands_z24/lib.sh
wheels || exit 1
bare 90 python3 yardsticks/bare_transformer.py --device cuda --precision amp --batch-tokens 40960 \
  --min-len 64 --max-len 64 --mode infer --warmup 10 --steps 15 --windows 5
finish
