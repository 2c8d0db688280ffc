#!/usr/bin/env bash
# Store Z28, command 10 (PyTorch, JAX, TF after the part commands): NCF at AMP in the cells calls 5 and 7-9 leave
# out on this machine (PyTorch eager and torch.compile train and infer, JAX train and infer, TF+XLA infer), each
# beside its plain loop, so that one card has NCF at every precision in every mode.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
E=(+experiment=frameworks_gpu precision=amp model=ncf mode=train,infer)
TB=(--device cuda --precision amp --batch 1048576 --steps 50 --windows 5)
sweep ncfa_torch 110 "${E[@]}" framework=torch execution=eager,compiled
bare 40 python3 yardsticks/bare_ncf.py "${TB[@]}" --mode train,infer
bare 70 python3 yardsticks/bare_ncf.py "${TB[@]}" --mode train,infer --compile
sweep ncfa_jax 50 "${E[@]}" framework=jax execution=compiled
bare 30 python3 yardsticks/bare_jax_ncf.py "${TB[@]}" --mode train,infer
sweep ncfa_tfx 40 +experiment=frameworks_gpu precision=amp model=ncf mode=infer pythons.tf=/tmp/tfpy framework=tf \
  execution=compiled
bare 30 /tmp/tfpy yardsticks/bare_tf_ncf.py "${TB[@]}" --mode infer --xla
finish
