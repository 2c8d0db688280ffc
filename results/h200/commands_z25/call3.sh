#!/usr/bin/env bash
# store Z25, call 3: PyTorch SSD300 eager and torch.compile with its yardstick; TF ResNet-50 XLA and graph,
# train and infer (the graph jobs were stopped at the cap and run again by call4.sh), and the TF yardstick (stopped at its cap)
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp)
TB=(--device cuda --precision amp)
sweep ssd_torch 190 "${E[@]}" model=ssd300 mode=train framework=torch execution=eager,compiled
bare 45 python3 yardsticks/bare_ssd300.py "${TB[@]}" --batch 128 --mode train --steps 10 --windows 5
sweep rn_tf 150 "${E[@]}" pythons.tf=/tmp/tfpy model=resnet50 mode=train,infer framework=tf execution=compiled,eager
bare 90 /tmp/tfpy yardsticks/bare_tf_classification.py "${TB[@]}" --batch 256 --mode train,infer --xla
finish
