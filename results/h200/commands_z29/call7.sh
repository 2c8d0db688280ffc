#!/usr/bin/env bash
# Store Z29, command 7 (TF, after the part commands): TF's graph mode at AMP with every id and label the step
# compares, adds, reshapes or joins held as int64 (dlbench and the TF yardsticks alike): TF's GPU kernels of
# those int32 ops keep their tensors in host memory, so each step copied NCF's ids (2^20 a batch), SSD300's
# labels (128 x 8732) and the Transformer's tokens to the host and back. NCF training and inference, SSD300
# and Transformer-base training, each beside its plain TF loop; on an H100 (Z28) NCF's graph-mode AMP cells
# read 40.0 M samples/s training (GPU 94% busy) and 131.2 M inference (82-91% busy) with int32 ids.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy framework=tf execution=eager)
TB=(--device cuda --precision amp)
sweep ncf_tfg64 100 "${E[@]}" model=ncf mode=train,infer
bare 45 /tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}" --batch 1048576 --mode train --steps 20 --windows 5
bare 40 /tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}" --batch 1048576 --mode infer --steps 50 --windows 5
sweep ssd_tfg64 110 "${E[@]}" model=ssd300 mode=train
bare 90 /tmp/tfpy yardsticks/bare_tf_ssd300.py "${TB[@]}" --batch 128 --mode train --warmup 5 --steps 10 --windows 5
sweep tr_tfg64 90 "${E[@]}" model=transformer mode=train
bare 70 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" --batch-tokens 40960 --min-len 64 --max-len 64 \
  --mode train --warmup 5 --steps 5 --windows 5
finish
