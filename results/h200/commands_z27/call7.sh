#!/usr/bin/env bash
# Store Z27, command 7 (JAX, PyTorch, TF; on a machine that has run call4, so TF is in place): Transformer
# greedy decoding (mode=infer) beside each plain loop: JAX in one jitted call per batch, PyTorch eager, and TF's
# graph mode a second time (harness, then yardstick), its first pair in call4 having spread 95-99%. (That TF
# job reused call4's finished run, resume=true: call8 runs it again.)
. results/h200/commands_z24/lib.sh
wheels || exit 1
E=(+experiment=frameworks_gpu precision=amp model=transformer mode=infer)
TB=(--device cuda --precision amp)
L=(--batch-tokens 40960 --min-len 64 --max-len 64 --mode infer --warmup 5 --steps 5 --windows 5)
sweep dec_jax 110 "${E[@]}" framework=jax execution=compiled model.decode_loop=device
bare 90 python3 yardsticks/bare_jax_transformer.py "${TB[@]}" "${L[@]}" --loop device
sweep dec_torch 90 "${E[@]}" framework=torch execution=eager
bare 70 python3 yardsticks/bare_transformer.py "${TB[@]}" "${L[@]}"
tf_install || exit 1
sweep dec_tfg2 110 "${E[@]}" pythons.tf=/tmp/tfpy framework=tf execution=eager
bare 80 /tmp/tfpy yardsticks/bare_tf_transformer.py "${TB[@]}" "${L[@]}"
finish
