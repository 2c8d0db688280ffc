#!/usr/bin/env bash
# Store Z28, command 9 (TF after the part commands, PyTorch): NCF training at fp32, tf32 and bf16 in the eager/graph
# class (TF graph mode, PyTorch eager), each beside its plain loop at the same precisions: with the loss-scale check
# no longer on the host, TF's graph mode is GPU-bound on NCF (call5), so its other precisions are worth a column.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=fp32,tf32,bf16 model=ncf mode=train)
TB=(--device cuda --precision fp32,tf32,bf16 --batch 1048576 --mode train --steps 20 --windows 5)
sweep ncfp_tfg 190 "${E[@]}" pythons.tf=/tmp/tfpy framework=tf execution=eager
bare 100 /tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}"
sweep ncfp_torche 100 "${E[@]}" framework=torch execution=eager
bare 60 python3 yardsticks/bare_ncf.py "${TB[@]}"
finish
