#!/usr/bin/env bash
# Store Z37, command 3: the tf32 cells of call1 and call2 in one command, for a call of about 400 s: the JAX harness
# with threefry, then with rbg, then the Flax loop with threefry, a process each.
. results/h200/commands_z24/lib.sh
wheels || exit 1
for g in threefry2x32 rbg; do
  fresh trp_jax_${g}_tf32 130 +experiment=frameworks_gpu framework=jax execution=compiled mode=train precision=tf32 \
    model=transformer framework.prng=$g
done
bare 130 python3 yardsticks/bare_jax_transformer.py --device cuda --mode train --batch-tokens 40960 --min-len 64 \
  --max-len 64 --prng threefry2x32 --precision tf32
finish
