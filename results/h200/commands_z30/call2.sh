#!/usr/bin/env bash
# Store Z30, command 2 (TF, after ../commands_z29/call4.sh on one machine): the TF+XLA cells call4's caps left
# without a pair on an H100, where one precision's job (start, XLA compilation, timing) takes about two minutes
# a side: Transformer-base training at bf16, harness and yardstick, and SSD300's fp32 yardstick (its harness
# ran in call4: the sweep below reuses it).
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu pythons.tf=/tmp/tfpy framework=tf execution=compiled mode=train)
sweep trp_tfx 170 "${E[@]}" model=transformer precision=bf16
bare 150 /tmp/tfpy yardsticks/bare_tf_transformer.py --device cuda --precision bf16 --mode train --xla \
  --batch-tokens 40960 --min-len 64 --max-len 64 --warmup 10 --steps 20 --windows 5
bare 170 /tmp/tfpy yardsticks/bare_tf_ssd300.py --device cuda --precision fp32 --mode train --xla --batch 128 \
  --warmup 5 --steps 10 --windows 5
finish
