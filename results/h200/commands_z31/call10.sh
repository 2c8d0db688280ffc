#!/usr/bin/env bash
# Store Z31, command 10: TF+XLA Transformer-base fp32 training, short and long windows alternated in one process
# (window_length.py): call9's harness with 10-step windows read 99.9% of the plain loop where its 2-step
# windows had read 99.0% (one job each, in separate processes).
. results/h200/commands_z24/lib.sh
tf_install || exit 1
stamp window_length
timeout "$(cap 300)" /tmp/tfpy results/h200/commands_z31/window_length.py --device cuda --precision fp32 --mode train \
  --xla --batch-tokens 40960 --min-len 64 --max-len 64 --warmup 10 2>>"$W/logs/window.err" | grep "^WINDOW\|^BARE" \
  | tee -a "$W/window.jsonl" | cut -c1-160
cp "$W/window.jsonl" "$out/" 2>/dev/null
finish
