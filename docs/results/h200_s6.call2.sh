#!/usr/bin/env bash
# Session s6, call 2 (issue #17), two streams as in call 1 (h200_s6.lib.sh), by priority against the
# deadline ($BUDGET s); each cell beside its yardstick in the same stream.
# ssd: SSD300 fp32 training and inference, batch 64 (fp32 cuDNN autotuning needs ~60 s of warm-up: the
#      yardstick gets 150 s); NCF on the real MovieLens-100K (carried in ../ml) against synthetic NCF of
#      the same sizes.
# mix: the SSD300 torch.compile pair (default mode, AMP training, batch 64), then the host-bound
#      5,120-token Transformer AMP pair, yardstick and harness alternating.
if [ -z "${1:-}" ]; then . "$(dirname "$0")/h200_s6.lib.sh"; streams "$0" ssd mix; exit 0; fi
. "$(dirname "$0")/h200_s4.lib.sh"
SSD=(model=ssd300 schedule.batch_size=64 "${S[@]}")
if [ "$1" = ssd ]; then
  room 120 ssd32 && { bare 150 bare_ssd300.py --batch 64 --precision fp32 --mode train "${B[@]}"
    sweep ssd32 160 "${SSD[@]}" precision=fp32 mode=train; }
  room 60 ssd32i && { bare 70 bare_ssd300.py --batch 64 --precision fp32 --mode infer "${B[@]}"
    sweep ssd32i 80 "${SSD[@]}" precision=fp32 mode=infer; }
  ML=$(cd ../ml/ml-100k 2>/dev/null && pwd)
  room 40 ncfml && [ -n "$ML" ] && sweep ncfml 60 model=ncf "${S[@]}" precision=amp mode=train \
    dataset=movielens,synthetic schedule.batch_size=65536 "dataset.path=$ML" model.num_users=943 model.num_items=1682
else
  room 120 ssdc && { bare 110 bare_ssd300.py --batch 64 --precision amp --mode train --compile "${B[@]}"
    sweep ssdc 140 "${SSD[@]}" precision=amp mode=train framework.compile=true; }
  TX=(--batch-tokens 5120 --min-len 64 --max-len 64)
  T=(model=transformer model.lengths=fixed)
  T50=(schedule.warmup_steps=10 schedule.steps_per_window=50 schedule.windows=5)
  for i in 4 5 6 7; do
    room 70 "ab$i" || break
    bare 30 bare_transformer.py "${TX[@]}" --precision amp --mode train --device $DEV --warmup 10 --steps 50 --windows 5
    sweep "ab$i" 40 "${T[@]}" "${T50[@]}" precision=amp mode=train
  done
fi
finish
