#!/usr/bin/env bash
# Store Z27, command 9 (PyTorch, after call7): eager Transformer decoding again, yardstick first this time,
# then the harness (resume=false): call7's pair read the harness 31% above its plain loop.
. results/h200/commands_z24/lib.sh
wheels || exit 1
bare 70 python3 yardsticks/bare_transformer.py --device cuda --precision amp --batch-tokens 40960 \
  --min-len 64 --max-len 64 --mode infer --warmup 5 --steps 5 --windows 5
stamp "dec_torch again"
timeout -s INT "$(cap 90)" python3 src/run.py -m "${C[@]}" resume=false "hydra.sweep.dir=$W/sweeps/dec_torch2" \
  +experiment=frameworks_gpu precision=amp model=transformer mode=infer framework=torch execution=eager \
  >>"$W/logs/dec_torch2.log" 2>&1
grep -E "/s \(|FAILED|rror" "$W/logs/dec_torch2.log" | grep -v "window [0-9]\|submitit" | tail -5
finish
