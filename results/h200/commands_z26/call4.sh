#!/usr/bin/env bash
# Store Z26, command 4 (TensorFlow, after the ten part commands): Transformer greedy decoding with XLA in one
# call per batch (model.decode_loop=device), and NCF training in graph mode, each beside its plain TF loop.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy)
TB=(--device cuda --precision amp)
sweep dec_tf 130 "${E[@]}" model=transformer mode=infer framework=tf execution=compiled model.decode_loop=device
bare 110 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" --batch-tokens 40960 --min-len 64 --max-len 64 --mode infer --xla --loop device --warmup 5 --steps 5 --windows 5
sweep ncf_tfg 120 "${E[@]}" model=ncf mode=train framework=tf execution=eager
bare 80 /tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}" --mode train --steps 5 --windows 5
finish
