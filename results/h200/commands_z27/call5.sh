#!/usr/bin/env bash
# Store Z27, command 5 (TensorFlow, graph mode: tf.function without XLA): NCF inference at batch 2^20 beside
# its plain TF loop, the one TF graph-mode cell not yet measured.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
sweep ncf_tfg_inf 200 +experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy model=ncf mode=infer framework=tf execution=eager
bare 120 /tmp/tfpy yardsticks/bare_tf_ncf.py --device cuda --precision amp --mode infer --steps 5 --windows 5
finish
