#!/usr/bin/env bash
# Store Z29, command 8 (PyTorch or JAX, about 200 s, for a sitting with little device time left): one pair the
# card lacks. On an H200, JAX greedy decoding in one jitted call a batch beside its Flax loop (the frameworks
# page has TF's decoding only); elsewhere, PyTorch eager ResNet-50 at batch 256, AMP, train and infer, beside
# yardsticks/bare_loop.py.
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=amp)
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  L=(--batch-tokens 40960 --min-len 64 --max-len 64 --mode infer --warmup 5 --steps 5 --windows 5)
  sweep dec_jax 110 "${E[@]}" model=transformer mode=infer framework=jax execution=compiled model.decode_loop=device
  bare 90 python3 yardsticks/bare_jax_transformer.py --device cuda --precision amp "${L[@]}" --loop device
else
  sweep rn_torche 110 "${E[@]}" model=resnet50 mode=train,infer framework=torch execution=eager
  B=(python3 yardsticks/bare_loop.py --batch 256 --precision amp --steps 50 --repeats 3)
  bare 40 "${B[@]}" --mode train
  bare 30 "${B[@]}" --mode infer
fi
finish
