#!/usr/bin/env bash
# Store Z27, command 8 (TF, after call4): graph-mode Transformer decoding again, harness then yardstick; the
# harness job with resume=false, since call7's identical job was resumed from call4's finished run.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
stamp "dec_tfg2 again"
timeout -s INT "$(cap 110)" python3 src/run.py -m "${C[@]}" resume=false "hydra.sweep.dir=$W/sweeps/dec_tfg3" \
  +experiment=frameworks_gpu precision=amp model=transformer mode=infer pythons.tf=/tmp/tfpy framework=tf \
  execution=eager >>"$W/logs/dec_tfg3.log" 2>&1
grep -E "/s \(|FAILED|rror" "$W/logs/dec_tfg3.log" | grep -v "window [0-9]\|submitit" | tail -5
bare 80 /tmp/tfpy yardsticks/bare_tf_transformer.py --device cuda --precision amp --batch-tokens 40960 \
  --min-len 64 --max-len 64 --mode infer --warmup 5 --steps 5 --windows 5
finish
