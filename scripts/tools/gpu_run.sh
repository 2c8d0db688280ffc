#!/usr/bin/env bash
# Run dlbench sweeps on a GPU machine and leave everything a results page needs in one folder.
#
#   bash scripts/tools/gpu_run.sh OUT [--bare "BARE_LOOP_ARGS"]... [--yardstick "COMMAND"]... -- OVERRIDES...
#   (from the repo root), e.g.
#   bash scripts/tools/gpu_run.sh /tmp/out --bare "--precision amp --optimizer fused" -- +experiment=gpu_matrix
#   bash scripts/tools/gpu_run.sh /tmp/out --yardstick "/opt/tf/bin/python yardsticks/bare_tf_ncf.py --xla
#       --batch 1048576" -- +experiment=frameworks_gpu model=ncf precision=amp pythons.tf=/opt/tf/bin/python
#
# OUT gets mlflow.db (+ mlartifacts/), one log per sweep, bare.jsonl (the BARE lines of yardsticks/
# bare_loop.py with each --bare, and of each --yardstick command, any yardstick with its interpreter; all run
# before and after the sweeps so the harness is compared with a hand-written loop in the same command),
# gpu.txt (nvidia-smi). Several OVERRIDES groups may be given, separated by `--`: one sweep each, same
# store. Machine specifics (dataset.path, env such as NCCL settings) come from conf/local/ (git-ignored,
# see conf/local.example/): conf/local/env.sh is sourced, conf/local/default.yaml is loaded by Hydra.
# The results page is then made with `python yardsticks/page.py --source NAME OUT/mlflow.db OUT/bare.jsonl`.
set -u
[ $# -ge 1 ] || { echo "usage: bash scripts/tools/gpu_run.sh OUT [--bare ARGS]... -- OVERRIDES... [-- OVERRIDES...]" >&2; exit 2; }
out=$1
shift
mkdir -p "$out"
[ -f conf/local/env.sh ] && . conf/local/env.sh
export PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
bare_args=() yardsticks=()
while [ $# -gt 1 ]; do
  case $1 in
    --bare) bare_args+=("$2") ;;
    --yardstick) yardsticks+=("$2") ;;
    *) break ;;
  esac
  shift 2
done
[ "${1:-}" = "--" ] && shift

bare() {
  for args in "${bare_args[@]}"; do
    # shellcheck disable=SC2086  # each --bare value is a list of arguments
    timeout 120 "$python" yardsticks/bare_loop.py --batch 256 --steps 80 --repeats 3 --min-window-s 2 $args | tee -a "$out/bare.jsonl"
  done
  for command in "${yardsticks[@]}"; do
    # shellcheck disable=SC2086  # each --yardstick value is a command line
    timeout 600 $command | grep "^BARE " | tee -a "$out/bare.jsonl"
  done
}
sweep() {  # one dlbench multirun into the shared store; its log keeps only the result lines on screen
  local n
  n=$(find "$out" -maxdepth 1 -name 'sweep*.log' | wc -l)
  "$python" src/run.py -m "$@" "tracking.uri=sqlite:///$out/mlflow.db" "hydra.sweep.dir=$out/sweeps/$n" \
    >"$out/sweep$n.log" 2>&1
  local rc=$?
  grep -E "/s \(p5|FAILED|KILLED|error" "$out/sweep$n.log" | grep -v "window [0-9]"
  return $rc
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >"$out/gpu.txt"
bare
status=0
group=()
for word in "$@" --; do
  if [ "$word" = "--" ]; then
    [ ${#group[@]} -gt 0 ] && { sweep "${group[@]}" || status=1; }
    group=()
  else
    group+=("$word")
  fi
done
bare
exit $status
