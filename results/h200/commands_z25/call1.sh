#!/usr/bin/env bash
# store Z25, call 1: dlbench's missing dependencies (the carried .whl) into /tmp/site
. results/h200/commands_z24/lib.sh
wheels || exit 1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
