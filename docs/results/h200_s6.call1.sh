#!/usr/bin/env bash
# Session s6, call 1 (issue #17), two streams (h200_s6.lib.sh: one GPU and half the cores each on a 2-GPU
# machine). Each cell beside its yardstick in the same stream, by priority against the deadline ($BUDGET s).
# tr:  Transformer-base after the yardstick's two fixes (FFN ReLU not in place; the attention mask on every
#      batch): at 40,960 target tokens a step (GPU-bound) amp/bf16 training and AMP greedy decoding, the
#      decoder also with `--mask auto` (the old, unmasked loop: flash kernel) to measure the kernel's share;
#      the torch.compile pair (AMP training, 5,120 tokens); fp32 training at 5,120 tokens (GPU-bound); then
#      the host-bound 5,120-token AMP pair, yardstick and harness alternating.
# r50: ResNet-50 bf16 training, batch 256, torch.compile mode max-autotune (CUDA graphs + autotuned
#      kernels; convolutions kept on cuDNN, TORCHINDUCTOR_MAX_AUTOTUNE_CONV_BACKENDS=ATEN, to bound the
#      compile time): the harness first (a cold inductor cache: its warmup_s is the full compile), then
#      bare_loop.py in the same mode.
if [ -z "${1:-}" ]; then . "$(dirname "$0")/h200_s6.lib.sh"; streams "$0" tr r50; exit 0; fi
. "$(dirname "$0")/h200_s4.lib.sh"
TX=(--batch-tokens 5120 --min-len 64 --max-len 64)
TB=(--batch-tokens 40960 --min-len 64 --max-len 64)
T=(model=transformer model.lengths=fixed)
T50=(schedule.warmup_steps=10 schedule.steps_per_window=50 schedule.windows=5)
if [ "$1" = tr ]; then
  room 100 big && { bare 80 bare_transformer.py "${TB[@]}" --precision amp,bf16 --mode train --device $DEV --warmup 10 --steps 20 --windows 10
    sweep big 100 "${T[@]}" model.batch_tokens=40960 schedule.warmup_steps=10 schedule.steps_per_window=20 schedule.windows=10 precision=amp,bf16 mode=train; }
  room 100 bigdec && { bare 45 bare_transformer.py "${TB[@]}" --precision amp --mode infer --device $DEV --warmup 5 --steps 10 --windows 3
    bare 45 bare_transformer.py "${TB[@]}" --precision amp --mode infer --mask auto --device $DEV --warmup 5 --steps 10 --windows 3
    sweep bigdec 60 "${T[@]}" model.batch_tokens=40960 schedule.warmup_steps=5 schedule.steps_per_window=10 schedule.windows=3 precision=amp mode=infer; }
  room 130 trc && { bare 100 bare_transformer.py "${TX[@]}" --precision amp --mode train --compile --device $DEV --warmup 10 --steps 50 --windows 5
    sweep trc 120 "${T[@]}" "${T50[@]}" precision=amp mode=train framework.compile=true; }
  room 70 tr32 && { bare 30 bare_transformer.py "${TX[@]}" --precision fp32 --mode train "${B[@]}"
    sweep tr32 45 "${T[@]}" "${S[@]}" precision=fp32 mode=train; }
  for i in 1 2 3; do
    room 70 "ab$i" || break
    bare 30 bare_transformer.py "${TX[@]}" --precision amp --mode train --device $DEV --warmup 10 --steps 50 --windows 5
    sweep "ab$i" 40 "${T[@]}" "${T50[@]}" precision=amp mode=train
  done
else
  export TORCHINDUCTOR_MAX_AUTOTUNE_CONV_BACKENDS=ATEN
  R=(model=resnet50 precision=bf16 mode=train schedule.batch_size=256 framework.compile=true framework.compile_mode=max-autotune)
  room 200 r50mx && sweep r50mx 380 "${R[@]}" schedule.warmup_steps=15 schedule.steps_per_window=10 schedule.windows=8
  room 60 r50mx_bare && bare 400 bare_loop.py --batch 256 --precision bf16 --compile --compile-mode max-autotune --warmup 15 --steps 50 --repeats 3
  grep -E "warm-up step|built" "$W/logs/r50mx.log" | cut -c1-140 | tail -4
fi
finish
