#!/usr/bin/env bash
# Session s6 (issue #17): run a call's two streams. On a 2-GPU machine at once, one GPU and half the host's
# cores each (taskset), each with its own MLflow store and yardstick file (/tmp/dlb_gN, returned under
# $OUT/gN); on a 1-GPU machine one after the other on GPU 0 (the first by priority, the second with what
# is left). A stream is `bash CALL_SCRIPT NAME`, which sources h200_s4.lib.sh for wheels, caps and sweeps.
#   streams CALL_SCRIPT FIRST SECOND     (needs BUDGET and OUT)
streams() {
  local call=$1 first=$2 second=$3 total=${BUDGET:-300} o=${OUT:-/tmp/out} t0 n half
  t0=$(date +%s); n=$(nproc); half=$((n / 2))
  . "$(dirname "$call")/h200_s4.lib.sh"
  wheels || return 1
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit,enforced.power.limit,power.max_limit,temperature.gpu,power.draw --format=csv
  nvidia-smi topo -m 2>/dev/null | head -5; echo "cores: $n"
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    CUDA_VISIBLE_DEVICES=0 W=/tmp/dlb_g0 OUT=$o/g0 BUDGET=$((total - 15)) taskset -c 0-$((half - 1)) bash "$call" "$first" >/tmp/g0.out 2>&1 &
    CUDA_VISIBLE_DEVICES=1 W=/tmp/dlb_g1 OUT=$o/g1 BUDGET=$((total - 15)) taskset -c $half-$((n - 1)) bash "$call" "$second" >/tmp/g1.out 2>&1 &
    wait
  else
    CUDA_VISIBLE_DEVICES=0 W=/tmp/dlb_g0 OUT=$o/g0 BUDGET=$((total * 55 / 100)) bash "$call" "$first" >/tmp/g0.out 2>&1
    CUDA_VISIBLE_DEVICES=0 W=/tmp/dlb_g1 OUT=$o/g1 BUDGET=$((total - $(date +%s) + t0 - 15)) bash "$call" "$second" >/tmp/g1.out 2>&1
  fi
  echo "### stream $first"; grep -v "^BARE" /tmp/g0.out | tail -30
  echo "### stream $second"; grep -v "^BARE" /tmp/g1.out | tail -30
}
