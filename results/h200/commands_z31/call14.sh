#!/usr/bin/env bash
# Store Z31, command 14: the spread between processes of the TF graph-mode SSD300 fp32 cell. The plain loop read
# 166.0 img/s in call4 and 163.5 in call13; two more plain-loop processes, alternating with one more harness job.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu pythons.tf=/tmp/tfpy framework=tf execution=eager mode=train precision=fp32)
B=(yardsticks/bare_tf_ssd300.py --device cuda --precision fp32 --mode train --batch 128 --warmup 5 --steps 10 --windows 5)
bare 100 /tmp/tfpy "${B[@]}"
fresh ssdp_tfg_fp32_r3 110 "${E[@]}" model=ssd300
bare 100 /tmp/tfpy "${B[@]}"
finish
