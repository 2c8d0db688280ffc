#!/usr/bin/env bash
# store Z25, calls 4-6 (each its own device command, the machine kept warm): the TF ResNet-50 yardstick again
# with a longer cap, then the TF graph-mode ResNet-50 training and inference jobs that call 3's cap had stopped
. results/h200/commands_z24/lib.sh
case "${1:-}" in
  bare) bare 215 /tmp/tfpy yardsticks/bare_tf_classification.py --device cuda --precision amp --batch 256 --mode train,infer --xla ;;
  graph-train) sweep rn_tfg 140 +experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy model=resnet50 mode=train framework=tf execution=eager ;;
  graph-infer) sweep rn_tfgi 75 +experiment=frameworks_gpu precision=amp pythons.tf=/tmp/tfpy model=resnet50 mode=infer framework=tf execution=eager ;;
esac
finish
