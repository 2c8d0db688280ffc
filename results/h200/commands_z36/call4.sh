#!/usr/bin/env bash
# Store Z36, command 4: PyTorch torch.compile Transformer-base training at bf16 beside its compiled plain loop,
# then JAX (jax.jit) SSD300 training at AMP (float16 with Flax's DynamicScale) beside its Flax loop.
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh trp_torchc_bf16 150 +experiment=frameworks_gpu framework=torch execution=compiled mode=train precision=bf16 \
  model=transformer
bare 120 python3 yardsticks/bare_transformer.py --device cuda --mode train --batch-tokens 40960 --min-len 64 \
  --max-len 64 --compile --precision bf16
fresh ssd_jax_amp 140 +experiment=frameworks_gpu framework=jax execution=compiled mode=train precision=amp \
  model=ssd300
bare 120 python3 yardsticks/bare_jax_ssd300.py --device cuda --precision amp --mode train --batch 128 --steps 10 \
  --windows 5
finish
