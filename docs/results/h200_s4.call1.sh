#!/usr/bin/env bash
# gpu2 helper, session s4, call 1 of the DALI machine (issue #17): install the wheels, keep DALI part 1,
# make the JPEG and COCO sets for call 4 (all cores, before any timing), then SSD300 tf32/fp32 x
# train/infer: the yardstick bare_ssd300.py, then the harness, same shapes (batch 64, channels_last).
. "$(dirname "$0")/h200_s4.lib.sh"
wheels || exit 1
take_part 1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv | tee "$W/logs/gpu.txt"
stamp "datasets"
$PY scripts/make_image_dataset.py --out /tmp/img --classes 32 --per-class 128 --formats folder --workers 12 \
  >"$W/logs/dataset_img.log" 2>&1 &
$PY scripts/make_coco_dataset.py --out /tmp/coco --train 1024 --val 256 >"$W/logs/dataset_coco.log" 2>&1
wait; tail -2 "$W/logs/dataset_img.log"; cat "$W/logs/dataset_coco.log"; du -sh /tmp/img /tmp/coco
ls /usr/share/datasets/fashion-mnist 2>&1 | head -2
# SSD300 tf32/fp32, train and infer (fp32 cuDNN autotuning is in the warm-up on both sides)
room 60 ssd32 && { bare 110 bare_ssd300.py --batch 64 --precision tf32,fp32 --mode train,infer "${B[@]}"
  sweep ssd32 140 model=ssd300 schedule.batch_size=64 "${S[@]}" precision=tf32,fp32 mode=train,infer; }
finish
