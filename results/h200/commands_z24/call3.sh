#!/usr/bin/env bash
. results/h200/commands_z24/lib.sh
E=(+experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy)
TB=(--device cuda --precision amp)
L=(--batch-tokens 40960 --min-len 64 --max-len 64)
sweep ncf_tf2 120 "${E[@]}" model=ncf mode=train,infer framework=tf execution=compiled,eager
sweep tr_tf 170 "${E[@]}" model=transformer mode=train framework=tf execution=compiled,eager
bare 70 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" "${L[@]}" --mode train --xla
sweep tr_jax 90 "${E[@]}" model=transformer mode=train framework=jax execution=compiled
bare 60 python3 yardsticks/bare_jax_transformer.py "${TB[@]}" "${L[@]}" --mode train
finish
grep -v "^I0000\|^W0000\|oneDNN\|absl" $W/logs/bare.err | tail -4 | cut -c1-300
