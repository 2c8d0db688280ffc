#!/usr/bin/env bash
# gpu2 helper, session s4, call 5 on a fresh machine (issue #17, phase B): NCF and Transformer-base after
# this session's changes (NCF negatives sampled on the device; bounded Transformer batch shapes), each
# beside its yardstick in the same command, stages by priority against the deadline ($BUDGET s):
#   1. NCF at batch 2^20, amp/bf16/tf32/fp32 x train/infer: bare_ncf.py, then the harness
#   2. Transformer-base amp/bf16 training with 50-step windows, then the greedy-decode pair (bf16, amp)
#      with 50-step windows; fixed 64-token sentences on both sides (80 x 64 = 5,120 target tokens a step)
#   3. NCF on the real MovieLens-100K (carried in ../ml) against synthetic NCF of the same sizes
#   4. Transformer tf32/fp32; 5. torch.compile pairs (NCF, Transformer), AMP training
. "$(dirname "$0")/h200_s4.lib.sh"
wheels || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv | tee -a "$W/logs/gpu.txt"
NB=1048576
N=(+experiment=ncf_dle schedule.batch_size=$NB "${S[@]}")
TX=(--batch-tokens 5120 --min-len 64 --max-len 64)
T=(model=transformer model.lengths=fixed)
T50=(schedule.warmup_steps=10 schedule.steps_per_window=50 schedule.windows=5)
D50=(schedule.warmup_steps=5 schedule.steps_per_window=50 schedule.windows=3)
room 60 ncf && { bare 45 bare_ncf.py --batch $NB --precision amp,bf16,tf32,fp32 --mode train,infer "${B[@]}"
  sweep ncf 135 "${N[@]}" precision=amp,bf16,tf32,fp32 mode=train,infer; }
room 60 tr && { bare 40 bare_transformer.py "${TX[@]}" --precision amp,bf16 --mode train --device $DEV --warmup 10 --steps 50 --windows 5
  sweep tr 55 "${T[@]}" "${T50[@]}" precision=amp,bf16 mode=train; }
room 60 trdec && { bare 50 bare_transformer.py "${TX[@]}" --precision bf16,amp --mode infer --device $DEV --warmup 5 --steps 50 --windows 3
  sweep trdec 70 "${T[@]}" "${D50[@]}" precision=bf16,amp mode=infer; }
ML=$(cd ../ml/ml-100k 2>/dev/null && pwd)
room 40 ncfml && [ -n "$ML" ] && sweep ncfml 45 model=ncf "${S[@]}" precision=amp mode=train dataset=movielens,synthetic schedule.batch_size=65536 \
  "dataset.path=$ML" model.num_users=943 model.num_items=1682
room 50 tr32 && { bare 40 bare_transformer.py "${TX[@]}" --precision tf32,fp32 --mode train,infer "${B[@]}"
  sweep tr32 80 "${T[@]}" "${S[@]}" precision=tf32,fp32 mode=train,infer; }
room 60 ncfc && { bare 50 bare_ncf.py --batch $NB --precision amp --mode train --compile "${B[@]}"
  sweep ncfc 70 "${N[@]}" precision=amp mode=train framework.compile=true; }
room 60 trc && { bare 60 bare_transformer.py "${TX[@]}" --precision amp --mode train --compile "${B[@]}"
  sweep trc 80 "${T[@]}" "${S[@]}" precision=amp mode=train framework.compile=true; }
finish
