#!/usr/bin/env bash
# gpu helper, session s3, call 2 (issue #17): Transformer-base and SSD300 harness vs bare_transformer.py /
# bare_ssd300.py, amp and bf16, train and infer; then one ResNet-50 bf16 max-autotune attempt.
# Run from the snapshot root. Stages by priority against a deadline.
set -u
T0=$(date +%s); END=$((T0 + ${BUDGET:-530})); W=/tmp/dlb; out=${OUT:-/tmp/out}; mkdir -p "$W/logs" "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}; DEV=${DEV:-cuda}
if [ -z "${NO_PIP:-}" ] && [ -d ../../.whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ../../.whl/*.whl
  export PYTHONPATH=/tmp/site
fi
$PY -c "import hydra, mlflow, sqlalchemy, torch; print('deps ok', torch.__version__, torch.cuda.is_available())" || exit 1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
C=(framework=torch device=$DEV report.enabled=false "tracking.uri=sqlite:///$W/mlflow.db")
S=(schedule.warmup_steps=10 schedule.steps_per_window=10 schedule.windows=5)
B=(--device $DEV --warmup 10 --steps 10 --windows 5)
SB=${SSD_BATCH:-64}; RB=${R50_BATCH:-256}
left() { echo $((END - $(date +%s))); }
cap() { local l; l=$(left); echo $(( $1 < l ? $1 : l )); }
room() { [ "$(left)" -ge "$1" ] || { echo "SKIP $2 (needs ~$1 s, $(left) left)"; return 1; }; }
bare() {  # bare CAP SCRIPT ARGS...: BARE lines into bare.jsonl
  local c; c=$(cap "$1"); shift; echo "== bare $* (cap $c s) t=$(( $(date +%s) - T0 ))"
  timeout "$c" $PY scripts/"$@" 2>>"$W/logs/bare.err" | tee -a "$W/bare.jsonl" | cut -c1-300
}
sweep() {  # sweep NAME CAP OVERRIDES...: harness multirun, SIGINT at the cap
  local name=$1 c; c=$(cap "$2"); shift 2; echo "== sweep $name (cap $c s) t=$(( $(date +%s) - T0 ))"
  timeout -s INT "$c" $PY src/run.py -m "${C[@]}" "hydra.sweep.dir=$W/sweeps/$name" "$@" >"$W/logs/$name.log" 2>&1
  grep -E "/s|FAILED|KILLED|rror" "$W/logs/$name.log" | grep -v "window [0-9]" | tail -8
}
# 1. Transformer-base: fixed lengths on both sides (80 sentences x 64 tokens = 5,120 target tokens a step)
room 80 tr && { bare 70 bare_transformer.py --batch-tokens 5120 --min-len 64 --max-len 64 --precision amp,bf16 --mode train,infer "${B[@]}"
  sweep tr 120 model=transformer model.lengths=fixed "${S[@]}" precision=amp,bf16 mode=train,infer; }
# 2. SSD300 batch 64, channels_last, SGD with weight decay (both)
room 120 ssd && { bare 90 bare_ssd300.py --batch $SB --precision amp,bf16 --mode train,infer "${B[@]}"
  sweep ssd 140 model=ssd300 schedule.batch_size=$SB "${S[@]}" precision=amp,bf16 mode=train,infer; }
# 3. ResNet-50 bf16 max-autotune-no-cudagraphs at batch 256 (convs stay cuDNN): harness only, cut at the deadline
R=(model=resnet50 precision=bf16 mode=train framework.compile=true schedule.warmup_steps=15 schedule.steps_per_window=10 schedule.windows=8)
export TORCHINDUCTOR_MAX_AUTOTUNE_CONV_BACKENDS=ATEN
room 120 r50mx && sweep r50mx 300 "${R[@]}" schedule.batch_size=$RB framework.compile_mode=max-autotune-no-cudagraphs
# results
tar czf "$out/db.tgz" -C "$W" mlflow.db 2>/dev/null; cp "$W/bare.jsonl" "$out/" 2>/dev/null
tar czf "$out/logs.tgz" -C "$W" logs sweeps
echo "total $(( $(date +%s) - T0 )) s"
