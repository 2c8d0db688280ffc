#!/usr/bin/env bash
# Store Z31, command 9: TF+XLA Transformer-base fp32 training, the harness with its plain loop's windows (10 warm-up
# steps, 5 windows of 10 steps) rather than frameworks_gpu's 5-s total (2 steps a window at 0.37 s a step).
# Two pairs read 98.3% and 99.0% with the short windows; a drain at each window's end, paid once per window,
# costs a 5x shorter window 5x more.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu pythons.tf=/tmp/tfpy framework=tf execution=compiled mode=train precision=fp32)
S=(schedule.min_timed_s=null schedule.warmup_steps=10 schedule.steps_per_window=10 schedule.windows=5)
fresh trp_tfx_fp32_w10 170 "${E[@]}" model=transformer "${S[@]}"
finish
