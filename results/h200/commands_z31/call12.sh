#!/usr/bin/env bash
# Store Z31, command 12: the TF graph-mode SSD300 plain loop at tf32 in a process of its own. In call4 its tf32
# read the same as its fp32 (166 img/s, the harness 290) after fp32 ran first in the same process.
. results/h200/commands_z24/lib.sh
tf_install || exit 1
bare 150 /tmp/tfpy yardsticks/bare_tf_ssd300.py --device cuda --precision tf32 --mode train --batch 128 \
  --warmup 5 --steps 10 --windows 5
finish
