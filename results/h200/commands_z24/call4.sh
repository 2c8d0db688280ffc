#!/usr/bin/env bash
. results/h200/commands_z24/lib.sh
E=(+experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy)
TB=(--device cuda --precision amp)
L=(--batch-tokens 40960 --min-len 64 --max-len 64)
bare 150 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" "${L[@]}" --mode train --xla --warmup 10 --steps 20 --windows 5
sweep tr_jax 160 "${E[@]}" model=transformer mode=train framework=jax execution=compiled
finish
