#!/usr/bin/env bash
# Store Z36, command 7: the plain loop of torch.compile SSD300 training at fp32 alone, given the whole call (a cold
# loop outlasted call5's 290 s on an H100: its first step, cuDNN's benchmark, takes about 200 s); run it and call6 on
# one machine kept warm for the pair.
. results/h200/commands_z24/lib.sh
wheels || exit 1
bare "$(left)" python3 yardsticks/bare_ssd300.py --device cuda --precision fp32 --mode train --batch 128 --steps 10 \
  --windows 5 --compile
finish
