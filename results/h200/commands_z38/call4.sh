#!/usr/bin/env bash
# Store Z38, command 4: the plain loop of torch.compile ResNet-50 inference (batch 256, AMP) first, then a second
# harness job: call2's pair read 99.5%, the closest of the store's pairs to the 99% line.
. results/h200/commands_z24/lib.sh
wheels || exit 1
bare 45 python3 yardsticks/bare_loop.py --batch 256 --precision amp --steps 50 --repeats 3 --mode infer --compile
fresh rn_torchc_infer_b 75 +experiment=frameworks_gpu precision=amp model=resnet50 mode=infer execution=compiled \
  framework=torch
finish
