#!/usr/bin/env bash
# Store Z28, command 11 (TF, after the part commands): NCF inference in TF's graph mode at every precision, beside
# its plain loop (the eager/graph class's inference cells; PyTorch eager's amp one is call10's).
. results/h200/commands_z24/lib.sh
tf_install || exit 1
sweep ncfi_tfg 90 +experiment=frameworks_gpu precision=fp32,tf32,amp,bf16 model=ncf mode=infer pythons.tf=/tmp/tfpy \
  framework=tf execution=eager
bare 50 /tmp/tfpy yardsticks/bare_tf_ncf.py --device cuda --precision fp32,tf32,amp,bf16 --batch 1048576 --mode infer \
  --steps 50 --windows 5
finish
