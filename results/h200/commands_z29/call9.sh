#!/usr/bin/env bash
# Store Z29, command 9 (TF, after the part commands; after call7 on one machine): graph-mode greedy decoding of
# Transformer-base with int64 ids from position to position (dlbench and the TF yardstick alike): TF's GPU
# kernels of int32 StridedSlice, BroadcastTo, Equal and Identity keep their tensors in host memory, so each
# position copied its argmax ids to the host. With int32 ids (Z5, H200) the harness read 26,789 generated
# tokens/s against its yardstick's 25,896, the GPU 63% busy. The harness job between two yardstick runs.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy model=transformer mode=infer framework=tf)
TB=(--device cuda --precision amp)
L=(--batch-tokens 40960 --min-len 64 --max-len 64 --mode infer --warmup 5 --steps 5 --windows 5)
bare 80 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" "${L[@]}"
sweep dec_tfg64 130 "${E[@]}" execution=eager
bare 80 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" "${L[@]}"
finish
