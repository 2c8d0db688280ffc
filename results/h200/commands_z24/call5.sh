#!/usr/bin/env bash
# the JAX Transformer yardstick that call 1 ran out of time for (the store's last command)
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 105 python3 yardsticks/bare_jax_transformer.py --device cuda --precision amp --batch-tokens 40960 \
  --min-len 64 --max-len 64 --mode train --warmup 10 --steps 20 --windows 5 2>/dev/null | grep ^BARE >"$OUT/bare_jax_tr.jsonl"
