#!/usr/bin/env bash
# gpu2 helper, session s4, call 5 on a fresh machine (issue #17, phase B): NCF and Transformer-base after
# this session's changes (NCF negatives drawn on the device in the step; bounded Transformer batch
# shapes), each beside its yardstick in the same command and on the same GPU.
#   bash h200_s4.call5.sh            wheels once, then the two streams below: at once on a 2-GPU machine
#                                    (one GPU each, own store under $OUT/g0 and $OUT/g1), else one after
#                                    the other on GPU 0 (ncf first, tr with what is left)
#   bash h200_s4.call5.sh ncf|tr     one stream, by priority against its deadline ($BUDGET s)
# ncf: NCF at batch 2^20, amp/bf16/tf32/fp32 x train/infer (bare_ncf.py, then the harness); NCF on the real
#      MovieLens-100K (carried in ../ml) against synthetic NCF of the same sizes; the torch.compile pair.
# tr:  Transformer-base, fixed 64-token sentences on both sides (80 x 64 = 5,120 target tokens a step):
#      amp/bf16 training with 50-step windows; the greedy-decode pair with 50-step windows (bf16, then amp);
#      tf32/fp32 train/infer; the torch.compile pair (AMP training).
if [ -z "${1:-}" ]; then
  . "$(dirname "$0")/h200_s4.lib.sh"
  wheels || exit 1
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv
  total=$BUDGET; o=$out
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    CUDA_VISIBLE_DEVICES=0 W=/tmp/dlb0 OUT=$o/g0 BUDGET=$((total - 10)) bash "$0" ncf >/tmp/g0.out 2>&1 &
    CUDA_VISIBLE_DEVICES=1 W=/tmp/dlb1 OUT=$o/g1 BUDGET=$((total - 10)) bash "$0" tr >/tmp/g1.out 2>&1 &
    wait
  else
    CUDA_VISIBLE_DEVICES=0 W=/tmp/dlb0 OUT=$o/g0 BUDGET=$((total * 45 / 100)) bash "$0" ncf >/tmp/g0.out 2>&1
    CUDA_VISIBLE_DEVICES=0 W=/tmp/dlb1 OUT=$o/g1 BUDGET=$((END - $(date +%s) - 10)) bash "$0" tr >/tmp/g1.out 2>&1
  fi
  cat /tmp/g0.out /tmp/g1.out; exit 0
fi
. "$(dirname "$0")/h200_s4.lib.sh"
NB=1048576
N=(+experiment=ncf_dle schedule.batch_size=$NB "${S[@]}")
TX=(--batch-tokens 5120 --min-len 64 --max-len 64)
T=(model=transformer model.lengths=fixed)
T50=(schedule.warmup_steps=10 schedule.steps_per_window=50 schedule.windows=5)
D50=(schedule.warmup_steps=5 schedule.steps_per_window=50 schedule.windows=3)
if [ "$1" = ncf ]; then
  room 60 ncf && { bare 50 bare_ncf.py --batch $NB --precision amp,bf16,tf32,fp32 --mode train,infer "${B[@]}"
    sweep ncf 150 "${N[@]}" precision=amp,bf16,tf32,fp32 mode=train,infer; }
  ML=$(cd ../ml/ml-100k 2>/dev/null && pwd)
  room 40 ncfml && [ -n "$ML" ] && sweep ncfml 50 model=ncf "${S[@]}" precision=amp mode=train \
    dataset=movielens,synthetic schedule.batch_size=65536 "dataset.path=$ML" model.num_users=943 model.num_items=1682
  room 60 ncfc && { bare 60 bare_ncf.py --batch $NB --precision amp --mode train --compile "${B[@]}"
    sweep ncfc 80 "${N[@]}" precision=amp mode=train framework.compile=true; }
  room 60 ncfc_inf && { bare 50 bare_ncf.py --batch $NB --precision amp --mode infer --compile "${B[@]}"
    sweep ncfc_inf 60 "${N[@]}" precision=amp mode=infer framework.compile=true; }
else
  room 60 tr && { bare 45 bare_transformer.py "${TX[@]}" --precision amp,bf16 --mode train --device $DEV --warmup 10 --steps 50 --windows 5
    sweep tr 60 "${T[@]}" "${T50[@]}" precision=amp,bf16 mode=train; }
  room 60 trdec && { bare 50 bare_transformer.py "${TX[@]}" --precision bf16 --mode infer --device $DEV --warmup 5 --steps 50 --windows 3
    sweep trdec 55 "${T[@]}" "${D50[@]}" precision=bf16 mode=infer; }
  room 60 trdec_amp && { bare 50 bare_transformer.py "${TX[@]}" --precision amp --mode infer --device $DEV --warmup 5 --steps 50 --windows 3
    sweep trdec_amp 55 "${T[@]}" "${D50[@]}" precision=amp mode=infer; }
  room 60 tr32 && { bare 60 bare_transformer.py "${TX[@]}" --precision tf32,fp32 --mode train,infer "${B[@]}"
    sweep tr32 90 "${T[@]}" "${S[@]}" precision=tf32,fp32 mode=train,infer; }
  room 60 trc && { bare 70 bare_transformer.py "${TX[@]}" --precision amp --mode train --compile "${B[@]}"
    sweep trc 80 "${T[@]}" "${S[@]}" precision=amp mode=train framework.compile=true; }
fi
finish
