#!/usr/bin/env bash
# Store Z38, command 2: ResNet-50 inference at batch 256, AMP, compiled against compiled: PyTorch torch.compile and
# JAX jax.jit, each beside its plain loop.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=amp model=resnet50 mode=infer execution=compiled)
sweep rn_torchc_infer 130 "${E[@]}" framework=torch
bare 80 python3 yardsticks/bare_loop.py --batch 256 --precision amp --steps 50 --repeats 3 --mode infer --compile
sweep rn_jax_infer 110 "${E[@]}" framework=jax
bare 80 python3 yardsticks/bare_jax_classification.py --device cuda --precision amp --batch 256 --mode infer
finish
