#!/usr/bin/env bash
# Session s6, call 4 (issue #17), two streams as in call 1 (h200_s6.lib.sh), after 6ec0f96 (the yardstick's
# decoder also gives PAD after EOS: on a CPU op count, the two decoders now issue the same operations).
# Greedy decoding at 40,960 target tokens a step is partly host-bound (GPU util ~70%), so single pairs
# spread +-10%: each stream times the pair (yardstick, then harness; 5 + 5 x 10 steps) as often as the
# deadline ($BUDGET s) allows, alternating AMP and BF16 (stream a starts with AMP, stream b with BF16).
if [ -z "${1:-}" ]; then . "$(dirname "$0")/h200_s6.lib.sh"; streams "$0" a b; exit 0; fi
. "$(dirname "$0")/h200_s4.lib.sh"
TB=(--batch-tokens 40960 --min-len 64 --max-len 64)
T=(model=transformer model.lengths=fixed model.batch_tokens=40960 schedule.warmup_steps=5 schedule.steps_per_window=10 schedule.windows=5)
if [ "$1" = a ]; then P=(amp bf16); else P=(bf16 amp); fi
for i in 1 2 3 4 5 6 7 8; do
  p=${P[$((i % 2 == 1 ? 0 : 1))]}
  room 60 "dec$i" || break
  bare 35 bare_transformer.py "${TB[@]}" --precision "$p" --mode infer --device $DEV --warmup 5 --steps 10 --windows 5
  sweep "dec$i" 45 "${T[@]}" precision="$p" mode=infer
done
finish
