#!/usr/bin/env bash
# Store Z28, command 5 (TF, after the part commands): graph-mode NCF training alternated with its plain TF loop:
# yardstick, harness, yardstick, harness, yardstick. Z26 read the harness at 115.7% of one yardstick run (2.40 M
# against 2.07 M samples/s, both host-bound with the GPU 5.7% busy); on this machine's CPU the two agree
# (95.5-100.5% in three alternations). The yardstick here times the harness's own schedule (20 warm-up steps,
# 10 windows of 2 steps, what min_timed_s=5 gave the harness in Z26) instead of Z26's 5 windows of 5 steps.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
Y=(/tmp/tfpy yardsticks/bare_tf_ncf.py --device cuda --precision amp --mode train --warmup 20 --steps 2 --windows 10)
harness() {  # a fresh harness job each time (resume=false: an identical finished run is not reused)
  stamp "ncf_tfg_$1"
  timeout -s INT "$(cap 110)" python3 src/run.py -m "${C[@]}" resume=false "hydra.sweep.dir=$W/sweeps/ncf_tfg_$1" \
    +experiment=frameworks_gpu precision=amp model=ncf mode=train pythons.tf=/tmp/tfpy framework=tf \
    execution=eager >>"$W/logs/ncf_tfg_$1.log" 2>&1
  grep -E "/s \(|FAILED|rror" "$W/logs/ncf_tfg_$1.log" | grep -v "window [0-9]\|submitit" | tail -3
}
bare 70 "${Y[@]}"
harness 1
bare 70 "${Y[@]}"
harness 2
bare 70 "${Y[@]}"
finish
