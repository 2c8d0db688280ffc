#!/usr/bin/env bash
# Store Z28, command 6 (TF, after the part commands): XLA Transformer decoding in one call a batch
# (model.decode_loop=device) alternated with its plain TF loop: yardstick, harness, yardstick, harness,
# yardstick. Z26 read the harness at 109.8% of one yardstick run on this card; on an H100 (Z27) the same pair
# read 100.0% and 100.4% with a yardstick run on each side.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp model=transformer mode=infer pythons.tf=/tmp/tfpy framework=tf
   execution=compiled model.decode_loop=device)
Y=(/tmp/tfpy yardsticks/bare_tf_transformer.py --device cuda --precision amp --batch-tokens 40960 --min-len 64
   --max-len 64 --mode infer --xla --loop device --warmup 5 --steps 5 --windows 5)
bare 60 "${Y[@]}"
fresh dec_tf_1 100 "${E[@]}"
bare 60 "${Y[@]}"
fresh dec_tf_2 100 "${E[@]}"
bare 60 "${Y[@]}"
finish
