#!/usr/bin/env bash
# Session s5, call 3 (issue #17): Transformer-base, after call 2 showed that at 5,120 target tokens a step
# the step is host-bound and both sides' 50-step windows spread +-15% on a machine of their own (yardstick
# AMP 118-162k, harness 109-139k): one pair of medians cannot show 1%. So, by priority against the
# deadline ($BUDGET s):
#   big:  40,960 target tokens a step (640 x 64), where the GPU, not the host, sets the pace: amp/bf16
#         training (10 + 10 x 20 steps) and AMP greedy decoding (5 + 3 x 10 steps), each beside its yardstick;
#   ab:   the 5,120-token AMP training pair three times, yardstick and harness alternating (ABABAB), so the
#         host's drift hits both sides alike and the spread of the ratio is seen;
#   tr32: tf32/fp32 training at 5,120 tokens.
. "$(dirname "$0")/h200_s4.lib.sh"
wheels || exit 1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv
TX=(--batch-tokens 5120 --min-len 64 --max-len 64)
TB=(--batch-tokens 40960 --min-len 64 --max-len 64)
T=(model=transformer model.lengths=fixed)
T50=(schedule.warmup_steps=10 schedule.steps_per_window=50 schedule.windows=10)
room 100 big && { bare 80 bare_transformer.py "${TB[@]}" --precision amp,bf16 --mode train --device $DEV --warmup 10 --steps 20 --windows 10
  sweep big 100 "${T[@]}" model.batch_tokens=40960 schedule.warmup_steps=10 schedule.steps_per_window=20 schedule.windows=10 precision=amp,bf16 mode=train; }
room 80 bigdec && { bare 50 bare_transformer.py "${TB[@]}" --precision amp --mode infer --device $DEV --warmup 5 --steps 10 --windows 3
  sweep bigdec 60 "${T[@]}" model.batch_tokens=40960 schedule.warmup_steps=5 schedule.steps_per_window=10 schedule.windows=3 precision=amp mode=infer; }
for i in 1 2 3; do
  room 70 "ab$i" || break
  bare 35 bare_transformer.py "${TX[@]}" --precision amp --mode train --device $DEV --warmup 10 --steps 50 --windows 10
  sweep "ab$i" 45 "${T[@]}" "${T50[@]}" precision=amp mode=train
done
room 70 tr32 && { bare 30 bare_transformer.py "${TX[@]}" --precision tf32,fp32 --mode train "${B[@]}"
  sweep tr32 45 "${T[@]}" "${S[@]}" precision=tf32,fp32 mode=train; }
finish
