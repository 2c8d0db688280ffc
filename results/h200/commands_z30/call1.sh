#!/usr/bin/env bash
# Store Z30, command 1 (TF, after the part commands and ../commands_z29/call7.sh on one machine): graph-mode
# greedy decoding of Transformer-base at AMP with int64 ids, alternated with its plain TF loop: yardstick,
# harness, yardstick, harness, yardstick. On an H100 (Z29) one harness job read 97.5-97.9% of the two yardstick
# runs around it while the same yardstick read 7% less in the next command: one run of each side cannot decide
# a 1% goal, so the pair gets two harness jobs and three yardstick runs in one command.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy model=transformer mode=infer framework=tf
   execution=eager)
Y=(/tmp/tfpy yardsticks/bare_tf_transformer.py --device cuda --precision amp --batch-tokens 40960 --min-len 64
   --max-len 64 --mode infer --warmup 5 --steps 5 --windows 5)
bare 80 "${Y[@]}"
fresh dec_tfg64_1 130 "${E[@]}"
bare 80 "${Y[@]}"
fresh dec_tfg64_2 130 "${E[@]}"
bare 80 "${Y[@]}"
finish
