#!/usr/bin/env bash
# Store Z26, command 5 (TensorFlow, graph mode: tf.function without XLA): SSD300 training at batch 128, and the
# Transformer's training and greedy decoding (host loop, a graph call per position), each beside its plain
# TF loop in the same command.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy framework=tf execution=eager)
TB=(--device cuda --precision amp)
sweep ssd_tfg 110 "${E[@]}" model=ssd300 mode=train
bare 90 /tmp/tfpy yardsticks/bare_tf_ssd300.py "${TB[@]}" --batch 128 --mode train --warmup 5 --steps 10 --windows 5
sweep tr_tfg 170 "${E[@]}" model=transformer mode=train,infer
bare 130 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" --batch-tokens 40960 --min-len 64 --max-len 64 --mode train,infer --warmup 5 --steps 5 --windows 5
finish
