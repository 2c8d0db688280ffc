#!/usr/bin/env bash
# Store Z35, command 5: what call1's loop did not reach in its 250 s (bf16), and the generator's cost at tf32 alone
# (threefry, then rbg), one precision per process so that each fits.
. results/h200/commands_z24/lib.sh
wheels || exit 1
L=(--device cuda --mode train --batch-tokens 40960 --min-len 64 --max-len 64)
bare 150 python3 yardsticks/bare_jax_transformer.py "${L[@]}" --precision bf16 --prng rbg
bare 150 python3 yardsticks/bare_jax_transformer.py "${L[@]}" --precision tf32 --prng threefry2x32
bare 150 python3 yardsticks/bare_jax_transformer.py "${L[@]}" --precision tf32 --prng rbg
finish
