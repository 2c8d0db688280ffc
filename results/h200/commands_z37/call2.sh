#!/usr/bin/env bash
# Store Z37, command 2: the same harness sweep with rbg (the default) on the same warm machine, so each precision
# has both generators in the harness within minutes; then the Flax loop with threefry at fp32.
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh trp_jax_rbg 300 +experiment=frameworks_gpu framework=jax execution=compiled mode=train \
  precision=fp32,tf32,bf16 model=transformer framework.prng=rbg
bare 150 python3 yardsticks/bare_jax_transformer.py --device cuda --mode train --batch-tokens 40960 --min-len 64 \
  --max-len 64 --prng threefry2x32 --precision fp32
finish
