#!/usr/bin/env bash
# gpu2 helper, session s4, call 4 of the DALI machine (issue #17): keep DALI part 4, join the parts and
# unpack DALI 2.4.0 (cuda130, cp312) into /tmp/site, then every DALI-fed job beside its synthetic twin in
# the same sweep: ResNet-50 AMP and BF16 training (fused SGD, JPEGs decoded by nvJPEG, 8 DALI threads as
# in session 2), SSD300 AMP training on the generated COCO set, then the variants (4 threads, CPU decode)
# and SSD300 inference.
. "$(dirname "$0")/h200_s4.lib.sh"
take_part 4
stamp "unpack"
dali_ok() { $PY -c "import torch, nvidia.dali as d; torch.ones(1, device='cuda'); print('DALI', d.__version__, 'torch', torch.__version__)"; }
cat /tmp/dali/dali312.part* | $PY -c "import lzma,sys,tarfile; tarfile.open(fileobj=lzma.open(sys.stdin.buffer), mode='r|').extractall('/tmp/site')" \
  || { echo "DALI unpack failed"; finish; exit 1; }
# nvimgcodec's wheel ships nvidia/__init__.py; if that hides the image's own nvidia packages, drop it
dali_ok || { rm -f /tmp/site/nvidia/__init__.py; dali_ok; } || { echo "DALI import failed"; finish; exit 1; }
[ -d /tmp/img/folder ] || $PY scripts/make_image_dataset.py --out /tmp/img --classes 32 --per-class 128 --formats folder --workers 12 >/dev/null
[ -d /tmp/coco/train2017 ] || $PY scripts/make_coco_dataset.py --out /tmp/coco --train 1024 --val 256
R=(model=resnet50 schedule.batch_size=256 schedule.warmup_steps=15 schedule.steps_per_window=10 schedule.windows=8 mode=train)
IMG=(dataset.path=/tmp/img/folder data.num_threads=8)
D=(model=ssd300 schedule.batch_size=64 "${S[@]}" dataset.path=/tmp/coco data.num_threads=8)
room 60 r50dali && sweep r50dali 170 "${R[@]}" precision=amp,bf16 dataset=synthetic,imagenet "${IMG[@]}"
room 40 ssddali && sweep ssddali 110 "${D[@]}" precision=amp mode=train dataset=synthetic,coco2017
room 30 r50dali_t4 && sweep r50dali_t4 45 "${R[@]}" precision=amp dataset=imagenet dataset.path=/tmp/img/folder data.num_threads=4
room 30 r50dali_cpu && sweep r50dali_cpu 45 "${R[@]}" precision=amp dataset=imagenet dataset.path=/tmp/img/folder \
  data.num_threads=14 data.decode=cpu
room 30 ssddali_inf && sweep ssddali_inf 70 "${D[@]}" precision=amp mode=infer dataset=synthetic,coco2017
finish
