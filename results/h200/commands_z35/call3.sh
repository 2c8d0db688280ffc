#!/usr/bin/env bash
# Store Z35, command 3: PyTorch eager SSD300 training at fp32 alone, beside its plain loop. On an H100 the fp32
# job's first warm-up step had not ended 150 s after the model was built (store Z34: the GPU 100% busy at
# 467 W, its memory idle: cuDNN's benchmark of fp32 convolutions); the caps give it room, and the log's
# warm-up lines say how long the first step took.
. results/h200/commands_z24/lib.sh
wheels || exit 1
fresh ssd_torche_fp32 330 +experiment=frameworks_gpu framework=torch execution=eager mode=train precision=fp32 model=ssd300
grep -h "built on\|warm-up step\|nothing new\|steps per window" "$W/logs/ssd_torche_fp32.log" | cut -c1-160 | head -8
bare 220 python3 yardsticks/bare_ssd300.py --device cuda --precision fp32 --mode train --batch 128 --steps 10 --windows 5
finish
