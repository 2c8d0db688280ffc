#!/usr/bin/env bash
# Store Z29, command 10 (TF, after the part commands; carry .dev/i32): what int64 ids are worth in TF's graph
# mode, one yardstick against itself on one card: each TF yardstick as of f97df2c^ (int32 ids and labels, made
# here with `git show f97df2c^:yardsticks/bare_tf_X.py > .dev/i32/bare_tf_X_i32.py`) beside today's (int64).
# bare.jsonl keeps the order: i32, i64 for each line pair below (NCF twice over).
. results/h200/commands_z24/lib.sh
tf_install || exit 1
cp .dev/i32/bare_tf_*_i32.py yardsticks/ || exit 1
TB=(--device cuda --precision amp)
N=(--batch 1048576 --mode train,infer --steps 20 --windows 5)
L=(--batch-tokens 40960 --min-len 64 --max-len 64 --warmup 5 --steps 5 --windows 5)
for v in _i32 "" _i32 ""; do bare 40 /tmp/tfpy yardsticks/bare_tf_ncf$v.py "${TB[@]}" "${N[@]}"; done
for v in _i32 ""; do bare 70 /tmp/tfpy yardsticks/bare_tf_transformer$v.py "${TB[@]}" "${L[@]}" --mode infer; done
for v in _i32 ""; do bare 70 /tmp/tfpy yardsticks/bare_tf_ssd300$v.py "${TB[@]}" --batch 128 --mode train --warmup 5 --steps 10 --windows 5; done
for v in _i32 ""; do bare 60 /tmp/tfpy yardsticks/bare_tf_transformer$v.py "${TB[@]}" "${L[@]}" --mode train; done
finish
