#!/usr/bin/env bash
# Store Z31, command 3: TF graph mode (tf.function, no XLA) training of Transformer-base at fp32, tf32 and bf16,
# beside its plain loop at the same precisions.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu pythons.tf=/tmp/tfpy framework=tf execution=eager mode=train precision=fp32,tf32,bf16)
sweep trp_tfg 300 "${E[@]}" model=transformer
bare 240 /tmp/tfpy yardsticks/bare_tf_transformer.py --device cuda --precision fp32,tf32,bf16 --mode train \
  --batch-tokens 40960 --min-len 64 --max-len 64 --warmup 5 --steps 5 --windows 5
finish
