#!/usr/bin/env bash
# Store Z41, shared by call1-call3 and call7: SSD300 training at batch 128 and precision $P, compiled against
# compiled: the torch.compile harness job and its compiled plain loop, then the JAX (jax.jit) job and its Flax
# loop, each loop timed in windows of at least 2 s, as the harness's (--min-window-s 2). One precision a process.
# REVERSED=1 runs the other order; ONLY=jax runs the JAX pair alone; TAG, if set, suffixes the sweeps' names. The caps sum to 530 s: on a freshly
# started machine a command wants BUDGET=540 (the JAX job alone took 35 s to build its model there).
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu execution=compiled mode=train model=ssd300 "precision=$P")
L=(--device cuda --precision "$P" --mode train --batch 128 --steps 10 --windows 5 --min-window-s 2)
torch_job() { fresh "ssd_torchc_$P${TAG:-}" 160 "${E[@]}" framework=torch; }
torch_loop() { bare 120 python3 yardsticks/bare_ssd300.py "${L[@]}" --compile; }
jax_job() { fresh "ssd_jax_$P${TAG:-}" 150 "${E[@]}" framework=jax; }
jax_loop() { bare 100 python3 yardsticks/bare_jax_ssd300.py "${L[@]}"; }
if [ "${ONLY:-}" = jax ]; then  # the JAX pair alone (250 s of caps)
  jax_job; jax_loop
elif [ -n "${REVERSED:-}" ]; then  # the other order: JAX first, each loop before its harness job
  jax_loop; jax_job; torch_loop; torch_job
else
  torch_job; torch_loop; jax_job; jax_loop
fi
finish
