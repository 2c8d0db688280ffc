#!/usr/bin/env bash
# Store Z41, shared by call1-call3: SSD300 training at batch 128 and precision $P, compiled against compiled:
# the torch.compile harness job and its compiled plain loop, then the JAX (jax.jit) job and its Flax loop, each
# loop timed in windows of at least 2 s, as the harness's (--min-window-s 2). One precision a process.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu execution=compiled mode=train model=ssd300 "precision=$P")
L=(--device cuda --precision "$P" --mode train --batch 128 --steps 10 --windows 5 --min-window-s 2)
fresh "ssd_torchc_$P" 150 "${E[@]}" framework=torch
bare 120 python3 yardsticks/bare_ssd300.py "${L[@]}" --compile
fresh "ssd_jax_$P" 110 "${E[@]}" framework=jax
bare 90 python3 yardsticks/bare_jax_ssd300.py "${L[@]}"
finish
