#!/usr/bin/env bash
# Second H200 session for issue #5, one stage per device call. The DALI bundle (xz tar of the installed
# wheels, cp312 only) travels in parts, one per call, so every call also runs a stage of the matrix.
# Run on the device machine from the repo root:  bash scripts/h200_session.sh STAGE [CARRIED_DIR]
#   synthetic  bare loop (foreach vs fused SGD), ResNet-50 amp/bf16 through dlbench, profiles
#   compile    torch.compile default and reduce-overhead, bare and through dlbench
#   vgg        VGG16 fp32/tf32 train/infer (cuDNN autotuning); the JPEG set is made meanwhile
#   dali       install DALI, then DALI-fed ResNet-50 against synthetic in the same command, profiles
#   recheck    (fresh machine, no DALI) fused SGD after its fix, bare and through dlbench, compiled
#   dali_next  (after dali's install) for the next session: DALI-fed AMP training with fused SGD, fewer
#              DALI threads, CPU decode and CUDA graphs, each against synthetic in the same command
# State lives in /tmp/dlb while the machine stays warm; each call copies it (db, logs, traces) to $OUT.
set -u
W=/tmp/dlb
out=${OUT:-/tmp/out}
mkdir -p "$W/logs" "$W/prof" /tmp/parts /tmp/site "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=/tmp/site
common=(framework=torch device=cuda schedule.batch_size=256 schedule.warmup_steps=15
        schedule.steps_per_window=10 schedule.windows=8 report.enabled=false
        "tracking.uri=sqlite:///$W/mlflow.db")
IMG=(dataset=imagenet dataset.path=/tmp/img/folder data.num_threads=8)

take() {  # keep this call's DALI part; install carried wheels
  [ -n "${1:-}" ] && [ -d "$1" ] || return 0
  cp "$1"/dali312.part* /tmp/parts/ 2>/dev/null
  if ls "$1"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$1"/*.whl
  fi
  ls -la /tmp/parts
}
sweep() {  # sweep NAME CAP_S overrides...: a dlbench multirun, killed with SIGINT (runs kept) at CAP_S
  local name=$1 cap=$2
  shift 2
  timeout -s INT "$cap" python3 src/run.py -m "${common[@]}" "hydra.sweep.dir=$W/sweeps/$name" "$@" \
    >"$W/logs/$name.log" 2>&1
  grep -E "samples/s|FAILED|KILLED|Error" "$W/logs/$name.log" | grep -v "window [0-9]"
}
bare() {
  timeout 60 python3 scripts/bare_loop.py --batch 256 --steps 80 --repeats 3 "$@" | tee -a "$W/bare.jsonl"
}
prof() {  # prof NAME overrides...: torch.profiler over 6 steps of the job
  local name=$1
  shift
  timeout 240 python3 scripts/profile_step.py --steps 6 --out "$W/prof/$name" "${common[@]}" "$@" \
    >"$W/prof/$name.txt" 2>&1
  grep "^PROFILE" "$W/prof/$name.txt" || tail -5 "$W/prof/$name.txt"
}
finish() {
  tar czf "$out/db.tgz" -C "$W" mlflow.db
  cp "$W/bare.jsonl" "$out/" 2>/dev/null
  tar czf "$out/logs.tgz" -C "$W" logs
  tar czf "$out/prof.tgz" -C "$W" prof && rm -rf "$W/prof"/*
  [ -d "$W/mlartifacts" ] && tar czf "$out/artifacts.tgz" -C "$W" mlartifacts
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv >"$out/gpu.txt"
  ls -la "$out"
}

stage_synthetic() {
  bare --precision amp --optimizer foreach
  bare --precision amp --optimizer fused
  sweep synthetic 300 model=resnet50 precision=amp,bf16 mode=train,infer
  sweep synthetic_foreach 90 model=resnet50 precision=amp mode=train framework.optimizer_impl=foreach
  bare --precision amp --optimizer fused
  bare --precision amp --optimizer foreach
  prof syn_amp_fused model=resnet50 precision=amp
  prof syn_amp_foreach model=resnet50 precision=amp framework.optimizer_impl=foreach
}

stage_compile() {
  bare --precision amp --compile
  sweep compile 200 model=resnet50 precision=amp mode=train framework.compile=true
  bare --precision amp --compile --compile-mode reduce-overhead
  sweep compile_ro 200 model=resnet50 precision=amp mode=train framework.compile=true \
    framework.compile_mode=reduce-overhead
}

stage_vgg() {
  local cap=${CAP:-420}
  python3 scripts/make_image_dataset.py --out /tmp/img --classes 32 --per-class 128 --formats folder \
    --workers 6 >"$W/logs/dataset.log" 2>&1 &
  sweep vgg "$cap" schedule.batch_size=64 model=vgg16 precision=fp32,tf32 mode=train,infer
  wait
  cat "$W/logs/dataset.log"
}

stage_dali() {
  cat /tmp/parts/dali312.part* | python3 -c "import lzma,sys,tarfile; tarfile.open(fileobj=lzma.open(sys.stdin.buffer), mode='r|').extractall('/tmp/site')" \
    && python3 -c "import nvidia.dali as d; print('DALI', d.__version__)" || return 1
  [ -d /tmp/img/folder ] || python3 scripts/make_image_dataset.py --out /tmp/img --classes 32 \
    --per-class 128 --formats folder --workers 12
  sweep dali 330 model=resnet50 precision=amp,bf16 mode=train,infer dataset=synthetic,imagenet \
    dataset.path=/tmp/img/folder data.num_threads=8
  sweep dali_data 60 model=resnet50 mode=data "${IMG[@]}"
  sweep dali_foreach 90 model=resnet50 precision=amp mode=train framework.optimizer_impl=foreach "${IMG[@]}"
  prof syn_amp_fused model=resnet50 precision=amp
  prof syn_amp_foreach model=resnet50 precision=amp framework.optimizer_impl=foreach
  prof dali_amp_fused model=resnet50 precision=amp "${IMG[@]}"
  prof dali_amp_foreach model=resnet50 precision=amp framework.optimizer_impl=foreach "${IMG[@]}"
  sweep dali_compile 200 model=resnet50 precision=amp mode=train framework.compile=true "${IMG[@]}"
}

stage_recheck() {  # after priming fused SGD's momentum (fresh machine, no DALI): the fused figures again
  bare --precision amp --optimizer fused
  sweep recheck 85 model=resnet50 precision=amp mode=train framework.optimizer_impl=fused,foreach
  bare --precision amp --optimizer foreach
  sweep recheck_compile 165 model=resnet50 precision=amp mode=train framework.compile=true \
    framework.compile_mode=default,reduce-overhead
}

stage_dali_next() {
  [ -d /tmp/img/folder ] || python3 scripts/make_image_dataset.py --out /tmp/img --classes 32 \
    --per-class 128 --formats folder --workers 12
  local D=(dataset.path=/tmp/img/folder model=resnet50 precision=amp mode=train)
  sweep next 420 "${D[@]}" dataset=synthetic,imagenet data.num_threads=8
  sweep next_threads 120 "${D[@]}" dataset=imagenet data.num_threads=4,12
  sweep next_cpu 120 "${D[@]}" dataset=imagenet data.decode=cpu data.num_threads=12
  sweep next_graphs 400 "${D[@]}" dataset=synthetic,imagenet framework.compile=true \
    framework.compile_mode=reduce-overhead
  prof next_dali "${D[@]}" dataset=imagenet
}

take "${2:-}"
"stage_$1"
finish
