#!/usr/bin/env bash
# Store Z28, command 2 (JAX): ResNet-50 at batch 256 (train, infer) and SSD300 at batch 128 (train), AMP,
# jax.jit, each beside its plain Flax/Optax loop in the same command.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=amp)
TB=(--device cuda --precision amp)
sweep rn_jax 150 "${E[@]}" model=resnet50 mode=train,infer framework=jax execution=compiled
bare 90 python3 yardsticks/bare_jax_classification.py "${TB[@]}" --batch 256 --mode train,infer
sweep ssd_jax 170 "${E[@]}" model=ssd300 mode=train framework=jax execution=compiled
bare 130 python3 yardsticks/bare_jax_ssd300.py "${TB[@]}" --batch 128 --mode train --steps 10 --windows 5
finish
