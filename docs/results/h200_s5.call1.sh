#!/usr/bin/env bash
# Session s5, call 1 (issue #17): Transformer-base on a one-GPU machine of its own (s4's pair shared its
# host with an NCF stream and is not sound), each cell beside its yardstick bare_transformer.py in the
# same command. Fixed 64-token sentences on both sides (80 x 64 = 5,120 target tokens a step).
# By priority against the deadline ($BUDGET s): amp/bf16 training (10 + 12 x 50 steps); greedy decoding
# amp/bf16 (5 + 3 x 25 steps); the torch.compile pair (AMP training); tf32/fp32 training.
. "$(dirname "$0")/h200_s4.lib.sh"
wheels || exit 1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv
nproc; uptime
TX=(--batch-tokens 5120 --min-len 64 --max-len 64)
T=(model=transformer model.lengths=fixed)
T50=(schedule.warmup_steps=10 schedule.steps_per_window=50 schedule.windows=12)
D25=(schedule.warmup_steps=5 schedule.steps_per_window=25 schedule.windows=3)
room 60 tr && { bare 75 bare_transformer.py "${TX[@]}" --precision amp,bf16 --mode train --device $DEV --warmup 10 --steps 50 --windows 12
  sweep tr 95 "${T[@]}" "${T50[@]}" precision=amp,bf16 mode=train; }
room 80 trdec && { bare 80 bare_transformer.py "${TX[@]}" --precision amp,bf16 --mode infer --device $DEV --warmup 5 --steps 25 --windows 3
  sweep trdec 95 "${T[@]}" "${D25[@]}" precision=amp,bf16 mode=infer; }
room 90 trc && { bare 80 bare_transformer.py "${TX[@]}" --precision amp --mode train --compile --device $DEV --warmup 10 --steps 50 --windows 12
  sweep trc 90 "${T[@]}" "${T50[@]}" precision=amp mode=train framework.compile=true; }
room 60 tr32 && { bare 45 bare_transformer.py "${TX[@]}" --precision tf32,fp32 --mode train "${B[@]}"
  sweep tr32 60 "${T[@]}" "${S[@]}" precision=tf32,fp32 mode=train; }
finish
