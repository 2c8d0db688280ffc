#!/usr/bin/env bash
# Session s6, call 3 (issue #17), two streams as in call 1 (h200_s6.lib.sh), after 9975234 (the harness's
# PyTorch decoder writes its key/value cache in place instead of concatenating), by priority against the
# deadline ($BUDGET s); each cell beside its yardstick in the same stream.
# tr:  at 40,960 target tokens a step: AMP and BF16 greedy decoding (5 + 5 x 10 steps); the torch.compile
#      pair in AMP training (at 5,120 tokens the compiled step is host-bound: call 1's pair, 122.5%, is
#      no comparison); then the 5,120-token compile pair once more.
# r50: ResNet-50 bf16 training, torch.compile max-autotune (convolutions on cuDNN) at batch 384 (call 1:
#      7,168 img/s at batch 256), the harness, then bare_loop.py.
if [ -z "${1:-}" ]; then . "$(dirname "$0")/h200_s6.lib.sh"; streams "$0" tr r50; exit 0; fi
. "$(dirname "$0")/h200_s4.lib.sh"
TX=(--batch-tokens 5120 --min-len 64 --max-len 64)
TB=(--batch-tokens 40960 --min-len 64 --max-len 64)
T=(model=transformer model.lengths=fixed)
if [ "$1" = tr ]; then
  for p in amp bf16; do
    room 120 "bigdec_$p" || break
    bare 60 bare_transformer.py "${TB[@]}" --precision $p --mode infer --device $DEV --warmup 5 --steps 10 --windows 5
    sweep "bigdec_$p" 75 "${T[@]}" model.batch_tokens=40960 schedule.warmup_steps=5 schedule.steps_per_window=10 schedule.windows=5 precision=$p mode=infer
  done
  room 200 bigc && { bare 120 bare_transformer.py "${TB[@]}" --precision amp --mode train --compile --device $DEV --warmup 10 --steps 20 --windows 5
    sweep bigc 140 "${T[@]}" model.batch_tokens=40960 schedule.warmup_steps=10 schedule.steps_per_window=20 schedule.windows=5 precision=amp mode=train framework.compile=true; }
  room 200 trc && { bare 100 bare_transformer.py "${TX[@]}" --precision amp --mode train --compile --device $DEV --warmup 10 --steps 50 --windows 5
    sweep trc 120 "${T[@]}" schedule.warmup_steps=10 schedule.steps_per_window=50 schedule.windows=5 precision=amp mode=train framework.compile=true; }
else
  export TORCHINDUCTOR_MAX_AUTOTUNE_CONV_BACKENDS=ATEN
  R=(model=resnet50 precision=bf16 mode=train schedule.batch_size=384 framework.compile=true framework.compile_mode=max-autotune)
  room 200 r50mx384 && sweep r50mx384 390 "${R[@]}" schedule.warmup_steps=15 schedule.steps_per_window=10 schedule.windows=8
  room 50 r50mx384_bare && bare 400 bare_loop.py --batch 384 --precision bf16 --compile --compile-mode max-autotune --warmup 15 --steps 50 --repeats 3
  grep -E "warm-up step|built" "$W/logs/r50mx384.log" | cut -c1-140 | tail -4
fi
finish
