#!/usr/bin/env bash
# Store Z41, command 1: SSD300 training at tf32, torch.compile and jax.jit, each beside its plain loop (ssd.sh).
P=tf32 . results/h200/commands_z41/ssd.sh
