#!/usr/bin/env bash
# Store Z45, command 1: where SSD300 training (batch 128) spends its GPU time at fp32 and tf32, in the Flax loop
# (jax.jit) and the torch.compile loop: each yardstick's --profile records one untimed window of 5 steps under its
# framework's profiler after its timed windows. XLA's pool is taken whole at start (an 80-GB card's growing pool
# refuses JAX's fp32 step one 34-GiB block). The tables go to the loops' log (logs/bare.err); the traces and each
# profile.json come back in prof.tgz (JAX's XSpace files, which hold the same events, left out).
. results/h200/commands_z24/lib.sh
wheels || exit 1
L=(--device cuda --precision fp32,tf32 --mode train --batch 128 --steps 5 --windows 3)
XLA_PYTHON_CLIENT_PREALLOCATE=true bare 150 python3 yardsticks/bare_jax_ssd300.py "${L[@]}" --profile "$out/prof/jax"
bare "$(left)" python3 yardsticks/bare_ssd300.py "${L[@]}" --compile --profile "$out/prof/torch"
for f in "$out"/prof/*/*/profile.json; do
  python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))
print('PROF', sys.argv[1].split('/prof/')[1], 'busy %.1f ms/step' % s['busy_ms_per_step'], s['by_category'])
for k in s['kernels'][:6]: print('   ', k[0][:90], k[1], k[2])" "$f"
done
tar czf "$out/prof.tgz" --exclude='*.xplane.pb' -C "$out" prof && rm -rf "$out/prof"
finish
