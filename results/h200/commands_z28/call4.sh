#!/usr/bin/env bash
# Store Z28, command 4 (TF, after the part commands): graph-mode Transformer decoding, host-bound (the GPU
# about 65% busy), alternated: yardstick, harness, yardstick, harness, yardstick. Z27's four yardstick runs
# spread 19% from run to run, so one pair cannot decide a 1% goal; alternating gives each harness run two
# neighbours and the page the median of each side.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
Y=(/tmp/tfpy yardsticks/bare_tf_transformer.py --device cuda --precision amp --batch-tokens 40960 --min-len 64
   --max-len 64 --mode infer --warmup 5 --steps 5 --windows 5)
harness() {  # a fresh harness job each time (resume=false: an identical finished run is not reused)
  stamp "dec_tfg_$1"
  timeout -s INT "$(cap 110)" python3 src/run.py -m "${C[@]}" resume=false "hydra.sweep.dir=$W/sweeps/dec_tfg_$1" \
    +experiment=frameworks_gpu precision=amp model=transformer mode=infer pythons.tf=/tmp/tfpy framework=tf \
    execution=eager >>"$W/logs/dec_tfg_$1.log" 2>&1
  grep -E "/s \(|FAILED|rror" "$W/logs/dec_tfg_$1.log" | grep -v "window [0-9]\|submitit" | tail -3
}
bare 80 "${Y[@]}"
harness 1
bare 80 "${Y[@]}"
harness 2
bare 80 "${Y[@]}"
finish
