#!/usr/bin/env bash
# store Z25, call 2 (TF, after the ten part commands): SSD300 XLA (its compile takes ~200 s a process) and graph
. results/h200/commands_z24/lib.sh
keep_parts
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy)
TB=(--device cuda --precision amp)
sweep ssd_tf 330 "${E[@]}" model=ssd300 mode=train framework=tf execution=compiled,eager
bare 200 /tmp/tfpy yardsticks/bare_tf_ssd300.py "${TB[@]}" --batch 128 --mode train --xla --warmup 5 --steps 10 --windows 5
finish
