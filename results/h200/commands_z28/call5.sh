#!/usr/bin/env bash
# Store Z28, command 5 (TF, after the part commands): graph-mode NCF training at AMP alternated with its plain TF
# loop (yardstick, harness, yardstick, harness, yardstick), then the XLA pair. Z26 (dlbench before 0b21090)
# read graph mode at 2.40 M samples/s with the GPU 5.7% busy, 115.7% of one yardstick run: Keras's loss-scale
# check ran a bool scatter per embedding table on the host every step. Harness and yardstick now check the
# sparse gradients' rows only (SparseLossScaleOptimizer in both), so this measures the cell anew.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
TB=(--device cuda --precision amp --mode train)
Y=(/tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}" --warmup 20 --steps 10 --windows 5)
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
sweep ncf_tfx 90 +experiment=frameworks_gpu precision=amp model=ncf mode=train pythons.tf=/tmp/tfpy framework=tf \
  execution=compiled
bare 60 /tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}" --xla --steps 50 --windows 5
finish
