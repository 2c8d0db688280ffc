#!/usr/bin/env bash
# Store Z37, command 4: the bf16 cells of call1 and call2 for a call of about 180 s: the JAX harness with threefry,
# then with rbg, a process each (no loop: call1's bf16 loop is the threefry side).
. results/h200/commands_z24/lib.sh
wheels || exit 1
for g in threefry2x32 rbg; do
  fresh trp_jax_${g}_bf16 88 +experiment=frameworks_gpu framework=jax execution=compiled mode=train precision=bf16 \
    model=transformer framework.prng=$g
done
finish
