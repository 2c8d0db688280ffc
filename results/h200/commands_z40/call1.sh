#!/usr/bin/env bash
# Store Z40, command 1: ResNet-50 training at batch 256, AMP, compiled against compiled (PyTorch torch.compile and
# JAX jax.jit), each beside its plain loop timed in windows of at least 2 s, as the harness's (--min-window-s 2).
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=amp model=resnet50 mode=train execution=compiled)
sweep rn_torchc_train 160 "${E[@]}" framework=torch
bare 110 python3 yardsticks/bare_loop.py --batch 256 --precision amp --steps 50 --repeats 3 --mode train --compile \
  --min-window-s 2
sweep rn_jax_train 130 "${E[@]}" framework=jax
bare 100 python3 yardsticks/bare_jax_classification.py --device cuda --precision amp --batch 256 --mode train \
  --min-window-s 2
finish
