#!/usr/bin/env bash
# Store Z27, command 4 (TensorFlow, after the part commands): Transformer greedy decoding, each harness job
# between two runs of its plain TF loop: graph mode (host loop, one tf.function call a position; the inference
# step now leaves its ids on the device), then XLA in one call a batch (model.decode_loop=device).
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy model=transformer mode=infer framework=tf)
TB=(--device cuda --precision amp)
L=(--batch-tokens 40960 --min-len 64 --max-len 64 --mode infer --warmup 5 --steps 5 --windows 5)
bare 80 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" "${L[@]}"
sweep dec_tfg 130 "${E[@]}" execution=eager
bare 80 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" "${L[@]}"
bare 60 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" "${L[@]}" --xla --loop device
sweep dec_tf 100 "${E[@]}" execution=compiled model.decode_loop=device
bare 60 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" "${L[@]}" --xla --loop device
finish
