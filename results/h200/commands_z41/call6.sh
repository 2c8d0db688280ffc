#!/usr/bin/env bash
# Store Z41, command 6: call4 (JAX SSD300 training at fp32, batch 128) with XLA's memory pool taken whole at start
# (XLA_PYTHON_CLIENT_PREALLOCATE=true, JAX's own default, which dlbench and its yardsticks turn off so that the
# GPU's memory reading shows what a job used), the harness job then its Flax loop. Without it both ran out of
# memory on an 80-GB card (call4, call5) with under 1% of XLA's pool in use, asking for one 34-GiB block. The
# guess this command tests: a pool that grows region by region keeps the regions compilation's autotuning left
# free, and they count against the cap, so a block that large finds no room though the memory is idle (on an
# H200 the GPU read 108,574 MiB in use under this job, about the whole 75% cap); one region taken at start has
# no such seams.
export XLA_PYTHON_CLIENT_PREALLOCATE=true
TAG=_prealloc . results/h200/commands_z41/call4.sh
