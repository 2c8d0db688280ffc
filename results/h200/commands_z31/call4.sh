#!/usr/bin/env bash
# Store Z31, command 4: TF graph mode training of SSD300 at fp32, tf32 and bf16, beside its plain loop.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu pythons.tf=/tmp/tfpy framework=tf execution=eager mode=train precision=fp32,tf32,bf16)
sweep ssdp_tfg 300 "${E[@]}" model=ssd300
bare 240 /tmp/tfpy yardsticks/bare_tf_ssd300.py --device cuda --precision fp32,tf32,bf16 --mode train --batch 128 \
  --warmup 5 --steps 10 --windows 5
finish
