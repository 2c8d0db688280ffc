#!/usr/bin/env bash
# Session s5, call 2 (issue #17): Transformer-base again on a one-GPU machine of its own, after call 1
# found the harness 15% under its yardstick there (108k vs 127k target tokens/s): it copied each synthetic
# batch from pageable host memory in the step, which waits for the GPU. Synthetic batches now go to the
# device once (HostSource pool, commit 90b94e3). Same shapes as call 1 (80 x 64 target tokens a step).
# By priority against the deadline ($BUDGET s): amp/bf16 training (10 + 10 x 50 steps), greedy decoding
# amp/bf16 (5 + 3 x 25 steps), the torch.compile pair (AMP training).
. "$(dirname "$0")/h200_s4.lib.sh"
wheels || exit 1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv
TX=(--batch-tokens 5120 --min-len 64 --max-len 64)
T=(model=transformer model.lengths=fixed)
T50=(schedule.warmup_steps=10 schedule.steps_per_window=50 schedule.windows=10)
D25=(schedule.warmup_steps=5 schedule.steps_per_window=25 schedule.windows=3)
room 60 tr && { bare 70 bare_transformer.py "${TX[@]}" --precision amp,bf16 --mode train --device $DEV --warmup 10 --steps 50 --windows 10
  sweep tr 90 "${T[@]}" "${T50[@]}" precision=amp,bf16 mode=train; }
room 80 trdec && { bare 75 bare_transformer.py "${TX[@]}" --precision amp,bf16 --mode infer --device $DEV --warmup 5 --steps 25 --windows 3
  sweep trdec 95 "${T[@]}" "${D25[@]}" precision=amp,bf16 mode=infer; }
room 120 trc && { bare 75 bare_transformer.py "${TX[@]}" --precision amp --mode train --compile --device $DEV --warmup 10 --steps 50 --windows 10
  sweep trc 85 "${T[@]}" "${T50[@]}" precision=amp mode=train framework.compile=true; }
finish
