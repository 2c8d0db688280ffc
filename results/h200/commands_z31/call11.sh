#!/usr/bin/env bash
# Store Z31, command 11: TF graph mode (tf.function, no XLA) training of Transformer-base at bf16 alone, beside its
# plain loop: call3's bf16 pair again with the preset's 2-s windows (it read 97.7% with 0.6-s windows).
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu pythons.tf=/tmp/tfpy framework=tf execution=eager mode=train precision=bf16)
sweep trp_tfg_bf16 150 "${E[@]}" model=transformer
bare 150 /tmp/tfpy yardsticks/bare_tf_transformer.py --device cuda --precision bf16 --mode train \
  --batch-tokens 40960 --min-len 64 --max-len 64 --warmup 5 --steps 5 --windows 5
finish
