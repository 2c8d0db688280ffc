#!/usr/bin/env bash
# Store Z41, command 7: call2 (SSD300 training at bf16) in the other order, JAX first and each plain loop before
# its harness job, to see whether a pair's ratio or the framework ratio moves with the order (call1 to call3 ran
# every loop right after its harness job, torch.compile before JAX; on an H200 the torch.compile bf16 pair read
# 99.1%, the others 99.4-100.3%).
REVERSED=1 TAG=_rev P=bf16 . results/h200/commands_z41/ssd.sh
