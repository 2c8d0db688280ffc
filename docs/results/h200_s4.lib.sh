#!/usr/bin/env bash
# gpu2 helper, session s4 (issue #17): what every device call of this session shares. Sourced by
# h200_s4.call*.sh, run from the snapshot root (.gpu/snap of the lead's checkout: ../../.whl is the wheel
# folder, ../daliN the carried DALI parts). State lives in /tmp/dlb while the machine stays warm, so the
# calls of one machine share one MLflow store; each call returns the store and logs so far under $OUT.
set -u
T0=$(date +%s); END=$((T0 + ${BUDGET:-300})); W=${W:-/tmp/dlb}; out=${OUT:-/tmp/out}; mkdir -p "$W/logs" "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=/tmp/site
PY=${PY:-python3}; DEV=${DEV:-cuda}
C=(framework=torch device=$DEV report.enabled=false "tracking.uri=sqlite:///$W/mlflow.db")
S=(schedule.warmup_steps=10 schedule.steps_per_window=10 schedule.windows=5)
B=(--device $DEV --warmup 10 --steps 10 --windows 5)
left() { echo $((END - $(date +%s))); }
cap() { local l; l=$(left); echo $(( $1 < l ? $1 : l )); }
room() { [ "$(left)" -ge "$1" ] || { echo "SKIP $2 (needs ~$1 s, $(left) left)"; return 1; }; }
stamp() { echo "== $* t=$(( $(date +%s) - T0 ))"; }
wheels() {  # dlbench's own dependencies (hydra, mlflow-skinny, ...), once per machine
  [ -e /tmp/site/.wheels ] && return 0
  [ -d ../../.whl ] || { echo "no ../../.whl"; return 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    ../../.whl/*.whl && touch /tmp/site/.wheels
  $PY -c "import hydra, mlflow, sqlalchemy, torch; print('deps ok', torch.__version__, torch.cuda.is_available())"
}
take_part() {  # keep this call's part of the DALI bundle (an xz tar split in parts, one per call)
  mkdir -p /tmp/dali; cp ../dali"$1"/dali312.part* /tmp/dali/ && ls -l /tmp/dali | tail -n +2
}
bare() {  # bare CAP SCRIPT ARGS...: the yardstick's BARE lines go to bare.jsonl
  local c; c=$(cap "$1"); shift; stamp "bare $* (cap $c s)"
  timeout "$c" $PY scripts/"$@" 2>>"$W/logs/bare.err" | tee -a "$W/bare.jsonl" | cut -c1-200
}
sweep() {  # sweep NAME CAP OVERRIDES...: a harness multirun, SIGINT at the cap (finished jobs are kept)
  local name=$1 c; c=$(cap "$2"); shift 2; stamp "sweep $name (cap $c s)"
  timeout -s INT "$c" $PY src/run.py -m "${C[@]}" "hydra.sweep.dir=$W/sweeps/$name" "$@" >"$W/logs/$name.log" 2>&1
  grep -E "/s \(|FAILED|KILLED|rror" "$W/logs/$name.log" | grep -v "window [0-9]" | cut -c1-160 | tail -8
}
finish() {  # what comes back: the store, the yardstick lines, logs (<= 8 files under $OUT)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader \
    >>"$W/logs/gpu.txt" 2>&1
  tar czf "$out/db.tgz" -C "$W" mlflow.db 2>/dev/null; cp "$W/bare.jsonl" "$out/" 2>/dev/null
  tar czf "$out/logs.tgz" -C "$W" logs sweeps 2>/dev/null
  stamp "total"; ls -l "$out" | tail -n +2
}
