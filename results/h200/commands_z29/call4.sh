#!/usr/bin/env bash
# Store Z29, command 4 (TF, after the part commands): Transformer-base and SSD300 training at fp32, tf32 and
# bf16 with XLA, beside the plain TF loop with XLA at the same precisions.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=fp32,tf32,bf16 mode=train pythons.tf=/tmp/tfpy framework=tf execution=compiled)
TB=(--device cuda --precision fp32,tf32,bf16 --mode train --xla)
L=(--batch-tokens 40960 --min-len 64 --max-len 64)
sweep trp_tfx 150 "${E[@]}" model=transformer
bare 110 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" "${L[@]}" --warmup 10 --steps 20 --windows 5
sweep ssdp_tfx 150 "${E[@]}" model=ssd300
bare 130 /tmp/tfpy yardsticks/bare_tf_ssd300.py "${TB[@]}" --batch 128 --warmup 5 --steps 10 --windows 5
finish
