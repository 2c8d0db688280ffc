#!/usr/bin/env bash
# Store Z41, command 8: call3's JAX pair alone, SSD300 training at amp (jax.jit job, then its Flax loop), for a
# machine whose torch.compile amp pair was already measured.
P=amp ONLY=jax . results/h200/commands_z41/ssd.sh
