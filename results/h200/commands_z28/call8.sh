#!/usr/bin/env bash
# Store Z28, command 8 (TF, after the part commands): NCF training and inference at fp32, tf32 and bf16 with XLA,
# beside the plain TF loop at the same precisions (command 7 has PyTorch and JAX).
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=fp32,tf32,bf16 model=ncf mode=train,infer pythons.tf=/tmp/tfpy)
sweep ncfp_tf 300 "${E[@]}" framework=tf execution=compiled
bare 150 /tmp/tfpy yardsticks/bare_tf_ncf.py --device cuda --precision fp32,tf32,bf16 --batch 1048576 \
  --mode train,infer --steps 50 --windows 5 --xla
finish
