#!/usr/bin/env bash
# Store Z28, command 5 (TF, after the part commands): graph-mode NCF training at AMP alternated with its plain TF
# loop (yardstick, harness, yardstick, harness, yardstick), then the XLA pair. Z26 (dlbench before 0b21090)
# read graph mode at 2.40 M samples/s with the GPU 5.7% busy, 115.7% of one yardstick run: Keras's loss-scale
# check ran a bool scatter per embedding table on the host every step. Harness and yardstick now check the
# sparse gradients' rows only (SparseLossScaleOptimizer in both), so this measures the cell anew.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp model=ncf mode=train pythons.tf=/tmp/tfpy framework=tf)
TB=(--device cuda --precision amp --mode train)
Y=(/tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}" --warmup 20 --steps 10 --windows 5)
bare 70 "${Y[@]}"
fresh ncf_tfg_1 110 "${E[@]}" execution=eager
bare 70 "${Y[@]}"
fresh ncf_tfg_2 110 "${E[@]}" execution=eager
bare 70 "${Y[@]}"
sweep ncf_tfx 90 "${E[@]}" execution=compiled
bare 60 /tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}" --xla --steps 50 --windows 5
finish
