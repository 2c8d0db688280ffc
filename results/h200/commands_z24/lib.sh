#!/usr/bin/env bash
# Store Z24: what every command on the GPU machine shares (run from the repo root there, with .whl/ and, for
# TF, one part of .tfp/ carried). State lives in /tmp/dlb while the machine stays warm, so the commands share
# one MLflow store; each returns the store and logs so far under $OUT. BUDGET caps a command's seconds.
set -u
T0=$(date +%s); END=$((T0 + ${BUDGET:-540})); W=/tmp/dlb; out=${OUT:-/tmp/out}; mkdir -p "$W/logs" "$out" /tmp/parts
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=/tmp/site
C=(device=cuda report.enabled=false "tracking.uri=sqlite:///$W/mlflow.db")
left() { echo $((END - $(date +%s))); }
cap() { local l; l=$(left); echo $(( $1 < l ? $1 : l )); }
stamp() { echo "== $* t=$(( $(date +%s) - T0 ))"; }
wheels() {
  [ -e /tmp/site/.ok ] && return 0
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && touch /tmp/site/.ok
  python3 -c "import hydra, mlflow, sqlalchemy, alembic, torch, jax; print('deps ok', torch.__version__, jax.__version__, torch.cuda.is_available())"
}
keep_parts() { [ -d .tfp ] && cp .tfp/* /tmp/parts/; ls /tmp/parts | tr '\n' ' '; echo; du -sh /tmp/parts; }
unz() {  # the carried TF tree, zstd --long=27
  if command -v zstd >/dev/null; then cat /tmp/parts/tf.part* | zstd -dc --long=27
  else cat /tmp/parts/tf.part* | python3 -c "import sys,zstandard; zstandard.ZstdDecompressor(max_window_size=2**28).copy_stream(sys.stdin.buffer, sys.stdout.buffer)"; fi
}
tf_install() {
  [ -e /tmp/tfpy ] && return 0
  (cd /tmp/parts && sha256sum -c SHA256SUMS) || return 1
  unz | tar xf - -C /tmp && mv /tmp/tfroot /tmp/tf || return 1
  local nv; nv=$(python3 -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))")/nvidia
  local lib="/tmp/tf/stubs:/tmp/tf/nvidia/cublas/lib:/tmp/tf/nvidia/cuda_runtime/lib:$nv/cudnn/lib:$nv/cu13/lib"
  printf '#!/bin/sh\nexport PYTHONPATH=/tmp/tf:/tmp/site${PYTHONPATH:+:$PYTHONPATH} LD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexec python3 "$@"\n' "$lib" >/tmp/tfpy
  chmod +x /tmp/tfpy; cat /tmp/tfpy; which ptxas; ls $nv
  /tmp/tfpy -c "import tensorflow as tf, keras; print('tf', tf.__version__, keras.__version__, tf.config.list_physical_devices('GPU'))" 2>&1 | grep -v "^W0000\|^I0000" | tail -3
}
bare() {  # bare CAP PY SCRIPT ARGS...: BARE lines to bare.jsonl
  local c; c=$(cap "$1"); shift; [ "$c" -ge 10 ] || { echo "SKIP $*"; return; }; stamp "bare $* (cap $c s)"
  local seen; seen=$(cat "$W/logs/bare.err" 2>/dev/null | wc -l)  # earlier loops' lines, left out of a failure's line
  timeout "$c" "$@" 2>>"$W/logs/bare.err" | grep "^BARE " | tee -a "$W/bare.jsonl" | python3 -c "
import sys,json
for l in sys.stdin:
    d=json.loads(l[5:]); r=d.get('throughput', d.get('samples_per_s'))
    print('BARE', d.get('precision'), d.get('mode'), d.get('compile'), round(r,1), d.get('p05'), d.get('p95'))"
  local rc=${PIPESTATUS[0]}  # a loop that fails or runs out of time prints no BARE line: say so, with its last error line
  [ "$rc" -eq 0 ] || echo "BARE FAILED rc=$rc: $(tail -n +$((seen + 1)) "$W/logs/bare.err" | grep -v '^W0000\|^I0000\|^ *$' | tail -1 | cut -c1-200)"
}
sweep() {  # sweep NAME CAP OVERRIDES...: SIGINT at the cap (finished jobs are kept; resume=true reuses them)
  local name=$1 c; c=$(cap "$2"); shift 2; [ "$c" -ge 10 ] || { echo "SKIP $name"; return; }; stamp "sweep $name (cap $c s)"
  timeout -s INT "$c" python3 src/run.py -m "${C[@]}" "resume=${RESUME:-true}" "hydra.sweep.dir=$W/sweeps/$name" "$@" >>"$W/logs/$name.log" 2>&1
  grep -E "/s \(|FAILED|KILLED|rror|steps per window" "$W/logs/$name.log" | grep -v "window [0-9]" | cut -c1-220 | tail -12
}
fresh() { RESUME=false sweep "$@"; }  # fresh NAME CAP OVERRIDES...: a sweep that never reuses a finished run, for repeats
finish() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader >>"$W/logs/gpu.txt" 2>&1
  python3 -c "import sqlite3;c=sqlite3.connect('$W/mlflow.db');print(c.execute('select status,count(*) from runs group by status').fetchall())" 2>/dev/null
  tar czf "$out/db.tgz" -C "$W" mlflow.db 2>/dev/null; cp "$W/bare.jsonl" "$out/" 2>/dev/null
  tar czf "$out/logs.tgz" -C "$W" logs 2>/dev/null
  stamp "total"
}
