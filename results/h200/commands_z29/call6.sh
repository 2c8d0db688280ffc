#!/usr/bin/env bash
# Store Z29, command 6 (TF, after the part commands): NCF inference in TF's graph mode at tf32, amp and bf16,
# alternated with its plain TF loop: yardstick, harness, yardstick, harness, yardstick. One pair each on an H100
# (Z28) read 97.7%, 96.7% and 98.9% with the GPU 82-91% busy, and the same amp pair 100.3% the day before (Z27):
# partly host-bound cells, where one run of each side cannot decide a 1% goal.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=tf32,amp,bf16 model=ncf mode=infer pythons.tf=/tmp/tfpy framework=tf
   execution=eager)
Y=(/tmp/tfpy yardsticks/bare_tf_ncf.py --device cuda --precision tf32,amp,bf16 --batch 1048576 --mode infer
   --steps 50 --windows 5)
bare 50 "${Y[@]}"
fresh ncfi_tfg_1 80 "${E[@]}"
bare 50 "${Y[@]}"
fresh ncfi_tfg_2 80 "${E[@]}"
bare 50 "${Y[@]}"
finish
