#!/usr/bin/env bash
# Store Z31, command 2: TF+XLA training: SSD300 at bf16 beside its plain loop, and a second Transformer-base fp32
# pair (one read 98.3% on an H100, store Z30, each side's windows within 0.3%: a fresh harness job and a
# fresh yardstick run decide whether the gap is the processes' or the harness's).
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu pythons.tf=/tmp/tfpy framework=tf execution=compiled mode=train)
sweep ssdp_tfx 150 "${E[@]}" model=ssd300 precision=bf16
bare 130 /tmp/tfpy yardsticks/bare_tf_ssd300.py --device cuda --precision bf16 --mode train --xla --batch 128 \
  --warmup 5 --steps 10 --windows 5
fresh trp_tfx_fp32 150 "${E[@]}" model=transformer precision=fp32
bare 130 /tmp/tfpy yardsticks/bare_tf_transformer.py --device cuda --precision fp32 --mode train --xla \
  --batch-tokens 40960 --min-len 64 --max-len 64 --warmup 10 --steps 10 --windows 5
finish
