#!/usr/bin/env bash
# Store Z41, command 2: SSD300 training at bf16, torch.compile and jax.jit, each beside its plain loop (ssd.sh).
P=bf16 . results/h200/commands_z41/ssd.sh
