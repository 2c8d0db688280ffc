#!/usr/bin/env bash
# Store Z27, command 6 (PyTorch): torch.compile Transformer-base training beside its plain-PyTorch loop
# (yardsticks/bare_transformer.py --compile), the harness job first, in one command: store Z24's yardstick was
# stopped while compiling, so this cell has had no pair.
. results/h200/commands_z24/lib.sh
wheels || exit 1
TB=(--device cuda --precision amp)
L=(--batch-tokens 40960 --min-len 64 --max-len 64)
sweep tr_torchc 150 +experiment=frameworks_gpu precision=amp model=transformer mode=train framework=torch execution=compiled
bare 200 python3 yardsticks/bare_transformer.py "${TB[@]}" "${L[@]}" --mode train --compile
finish
