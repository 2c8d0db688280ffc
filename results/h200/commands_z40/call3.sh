#!/usr/bin/env bash
# Store Z40, command 3: ResNet-50 at batch 256, AMP, PyTorch eager, training then inference, each beside its plain
# loop in windows of at least 2 s: the eager column beside call1's and call2's compiled pairs.
. results/h200/commands_z24/lib.sh
wheels || exit 1
sweep rn_torch_eager 130 +experiment=frameworks_gpu precision=amp model=resnet50 mode=train,infer execution=eager \
  framework=torch
B=(python3 yardsticks/bare_loop.py --batch 256 --precision amp --steps 50 --repeats 3 --min-window-s 2)
bare 50 "${B[@]}" --mode train
bare 45 "${B[@]}" --mode infer
finish
