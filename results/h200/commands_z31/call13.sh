#!/usr/bin/env bash
# Store Z31, command 13: the TF graph-mode SSD300 fp32 pair again (call4's read 98.8%: 164.0 vs 166.0 img/s, the
# harness with 3-step windows, the plain loop with 10-step ones): the plain loop alone, the harness with the
# preset, then the harness with the plain loop's windows (5 warm-up steps, 5 windows of 10 steps).
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu pythons.tf=/tmp/tfpy framework=tf execution=eager mode=train precision=fp32)
bare 110 /tmp/tfpy yardsticks/bare_tf_ssd300.py --device cuda --precision fp32 --mode train --batch 128 \
  --warmup 5 --steps 10 --windows 5
fresh ssdp_tfg_fp32 120 "${E[@]}" model=ssd300
S=(schedule.min_timed_s=null schedule.warmup_steps=5 schedule.steps_per_window=10 schedule.windows=5)
fresh ssdp_tfg_fp32_w10 150 "${E[@]}" model=ssd300 "${S[@]}"
finish
