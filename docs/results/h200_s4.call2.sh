#!/usr/bin/env bash
# gpu2 helper, session s4, call 2 of the DALI machine (issue #17): keep DALI part 2, then the SSD300
# torch.compile pair (default mode, AMP training, batch 64): bare_ssd300.py --compile, then the harness
# with framework.compile=true; both compile the model only, and compilation falls in the warm-up.
. "$(dirname "$0")/h200_s4.lib.sh"
take_part 2
room 60 ssdc && { bare 110 bare_ssd300.py --batch 64 --precision amp --mode train --compile "${B[@]}"
  sweep ssdc 130 model=ssd300 schedule.batch_size=64 "${S[@]}" precision=amp mode=train framework.compile=true; }
finish
