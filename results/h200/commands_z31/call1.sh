#!/usr/bin/env bash
# Store Z31, command 1: TF+XLA training at tf32 (TF32 on, float32 variables) beside its plain loop: Transformer-base, then
# SSD300. Sized for an H100, where one precision's TF+XLA job takes about two minutes a side (start, build,
# XLA compilation, warm-up, timing): commands_z29's call4 fitted fp32 only into each 150-s sweep of three.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu pythons.tf=/tmp/tfpy framework=tf execution=compiled mode=train precision=tf32)
TB=(--device cuda --precision tf32 --mode train --xla)
sweep trp_tfx 150 "${E[@]}" model=transformer
bare 130 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" --batch-tokens 40960 --min-len 64 --max-len 64 \
  --warmup 10 --steps 20 --windows 5
sweep ssdp_tfx 150 "${E[@]}" model=ssd300
bare 130 /tmp/tfpy yardsticks/bare_tf_ssd300.py "${TB[@]}" --batch 128 --warmup 5 --steps 10 --windows 5
finish
