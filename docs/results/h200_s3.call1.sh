#!/usr/bin/env bash
# gpu helper, session s3, call 1 (issue #17): NCF harness vs bare_ncf.py; ResNet-50 bf16 compile attempts
# vs bare_loop.py. Run from the snapshot root. Stages by priority against a deadline.
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
NB=${NCF_BATCH:-1048576}; RB=${R50_BATCH:-256}; RB2=${R50_BATCH2:-384}
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
# 1. NCF amp/bf16 x train/infer, DLE's batch 2^20 at ML-20M sizes
room 60 ncf && { bare 60 bare_ncf.py --batch $NB --precision amp,bf16 --mode train,infer "${B[@]}"
  sweep ncf 100 +experiment=ncf_dle schedule.batch_size=$NB "${S[@]}" precision=amp,bf16 mode=train,infer; }
# 2. ResNet-50 bf16 + CUDA graphs (reduce-overhead), batch 256: yardstick first (warms inductor's cache)
R=(model=resnet50 precision=bf16 mode=train framework.compile=true schedule.warmup_steps=15 schedule.steps_per_window=10 schedule.windows=8)
room 200 r50ro && { bare 130 bare_loop.py --batch $RB --precision bf16 --compile --compile-mode reduce-overhead --steps 50 --repeats 3
  sweep r50ro 150 "${R[@]}" schedule.batch_size=$RB framework.compile_mode=reduce-overhead; }
# 3. NCF tf32/fp32
room 70 ncf32 && { bare 50 bare_ncf.py --batch $NB --precision tf32,fp32 --mode train,infer "${B[@]}"
  sweep ncf32 90 +experiment=ncf_dle schedule.batch_size=$NB "${S[@]}" precision=tf32,fp32 mode=train,infer; }
# 4. ResNet-50 bf16 reduce-overhead at batch 384, then max-autotune-no-cudagraphs at 256 (convs stay cuDNN)
room 100 r50ro384 && sweep r50ro384 130 "${R[@]}" schedule.batch_size=$RB2 framework.compile_mode=reduce-overhead
export TORCHINDUCTOR_MAX_AUTOTUNE_CONV_BACKENDS=ATEN
room 90 r50mx && sweep r50mx 200 "${R[@]}" schedule.batch_size=$RB framework.compile_mode=max-autotune-no-cudagraphs
# results
tar czf "$out/db.tgz" -C "$W" mlflow.db 2>/dev/null; cp "$W/bare.jsonl" "$out/" 2>/dev/null
tar czf "$out/logs.tgz" -C "$W" logs sweeps
echo "total $(( $(date +%s) - T0 )) s"
