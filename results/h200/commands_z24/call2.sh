#!/usr/bin/env bash
# last part, TF install, TF NCF sweep + yardsticks
. results/h200/commands_z24/lib.sh
keep_parts
stamp install; tf_install || exit 1; stamp installed
E=(+experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy)
TB=(--device cuda --precision amp)
sweep ncf_tf 200 "${E[@]}" model=ncf mode=train,infer framework=tf execution=compiled,eager
bare 80 /tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}" --batch 1048576 --mode train,infer --steps 50 --windows 5 --xla
bare 80 /tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}" --batch 1048576 --mode train,infer --steps 50 --windows 5
finish
