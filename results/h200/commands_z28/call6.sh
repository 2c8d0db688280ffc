#!/usr/bin/env bash
# Store Z28, command 6 (TF, after the part commands): XLA Transformer decoding in one call a batch
# (model.decode_loop=device) alternated with its plain TF loop: yardstick, harness, yardstick, harness,
# yardstick. Z26 read the harness at 109.8% of one yardstick run on this card; on an H100 (Z27) the same pair
# read 100.0% and 100.4% with a yardstick run on each side.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
Y=(/tmp/tfpy yardsticks/bare_tf_transformer.py --device cuda --precision amp --batch-tokens 40960 --min-len 64
   --max-len 64 --mode infer --xla --loop device --warmup 5 --steps 5 --windows 5)
harness() {  # a fresh harness job each time (resume=false: an identical finished run is not reused)
  stamp "dec_tf_$1"
  timeout -s INT "$(cap 100)" python3 src/run.py -m "${C[@]}" resume=false "hydra.sweep.dir=$W/sweeps/dec_tf_$1" \
    +experiment=frameworks_gpu precision=amp model=transformer mode=infer pythons.tf=/tmp/tfpy framework=tf \
    execution=compiled model.decode_loop=device >>"$W/logs/dec_tf_$1.log" 2>&1
  grep -E "/s \(|FAILED|rror" "$W/logs/dec_tf_$1.log" | grep -v "window [0-9]\|submitit" | tail -3
}
bare 60 "${Y[@]}"
harness 1
bare 60 "${Y[@]}"
harness 2
bare 60 "${Y[@]}"
finish
