#!/usr/bin/env bash
# Store Z41, command 3: SSD300 training at amp, torch.compile and jax.jit, each beside its plain loop (ssd.sh).
P=amp . results/h200/commands_z41/ssd.sh
