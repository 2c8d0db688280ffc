#!/usr/bin/env bash
# Store Z28, command 1 (PyTorch): dlbench's dependencies, then ResNet-50 at batch 256, AMP, train and infer,
# eager and torch.compile, each beside its plain-PyTorch loop (yardsticks/bare_loop.py) in the same command.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=amp)
sweep rn_torch 270 "${E[@]}" model=resnet50 mode=train,infer framework=torch execution=eager,compiled
B=(python3 yardsticks/bare_loop.py --batch 256 --precision amp --steps 50 --repeats 3)
bare 40 "${B[@]}" --mode train
bare 30 "${B[@]}" --mode infer
bare 110 "${B[@]}" --mode train --compile
bare 70 "${B[@]}" --mode infer --compile
finish
