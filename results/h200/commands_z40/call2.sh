#!/usr/bin/env bash
# Store Z40, command 2: ResNet-50 inference at batch 256, AMP, compiled against compiled, each beside its plain loop
# in windows of at least 2 s; the torch.compile loop before and after its harness job (the pair that read 99.1-99.5%
# against 0.54-s loop windows on an H100).
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=amp model=resnet50 mode=infer execution=compiled)
B=(python3 yardsticks/bare_loop.py --batch 256 --precision amp --steps 50 --repeats 3 --mode infer --compile
  --min-window-s 2)
bare 80 "${B[@]}"
sweep rn_torchc_infer 130 "${E[@]}" framework=torch
bare 80 "${B[@]}"
sweep rn_jax_infer 110 "${E[@]}" framework=jax
bare 80 python3 yardsticks/bare_jax_classification.py --device cuda --precision amp --batch 256 --mode infer \
  --min-window-s 2
finish
