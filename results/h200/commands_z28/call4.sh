#!/usr/bin/env bash
# Store Z28, command 4 (TF, after the part commands): graph-mode Transformer decoding, host-bound (the GPU
# about 65% busy), alternated: yardstick, harness, yardstick, harness, yardstick. Z27's four yardstick runs
# spread 19% from run to run, so one pair cannot decide a 1% goal; alternating gives each harness run two
# neighbours and the page the median of each side.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp model=transformer mode=infer pythons.tf=/tmp/tfpy framework=tf
   execution=eager)
Y=(/tmp/tfpy yardsticks/bare_tf_transformer.py --device cuda --precision amp --batch-tokens 40960 --min-len 64
   --max-len 64 --mode infer --warmup 5 --steps 5 --windows 5)
bare 80 "${Y[@]}"
fresh dec_tfg_1 110 "${E[@]}"
bare 80 "${Y[@]}"
fresh dec_tfg_2 110 "${E[@]}"
bare 80 "${Y[@]}"
finish
