#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment with every pinned dependency.
# Usage: scripts/setup/setup_env.sh [VENV_DIR]   (default .venv; DLBENCH_VENV overrides)
# Idempotent: a stamp file records the hash of the requirement files, so a second call is instant.
# Then the JAX worker's own environment (scripts/setup/setup_jax_env.sh, its own stamp): JAX needs numpy >= 2.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${1:-${DLBENCH_VENV:-.venv}}"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null || py=python3
stamp="$venv/.dlbench-requirements"
want=$(cat requirements.txt requirements-dev.txt scripts/setup/setup_env.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "setup: $venv is up to date"
  exec scripts/setup/setup_jax_env.sh
fi
echo "setup: installing pinned dependencies into $venv (first time: a few minutes, about 9 GB)"
# pip's own error on a full disk comes minutes in, mid-package: say it first, in one line.
free_gb=$(df -P -BG "$(dirname "$venv")" | awk 'NR==2 {print int($4)}')
if [ "${free_gb:-0}" -lt 12 ]; then
  echo "setup: warning: ${free_gb} GB free where $venv goes; .venv and .venv-jax need about 11 GB: free some space or set DLBENCH_VENV to a disk with room" >&2
fi
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade pip wheel setuptools
"${pip[@]}" install -q -r requirements.txt -r requirements-dev.txt
# The DALI TensorFlow plugin compiles against the installed TensorFlow: it must come after it,
# without build isolation (DALI's docs). A failure here only disables DALI for TensorFlow.
"${pip[@]}" install -q --no-build-isolation nvidia-dali-tf-plugin-cuda130==2.4.0 \
  || echo "setup: warning: nvidia-dali-tf-plugin-cuda130 did not install; DALI-fed TensorFlow runs are unavailable" >&2
"${pip[@]}" install -q --no-deps -e .
echo "$want" > "$stamp"
echo "setup: done ($venv)"
exec scripts/setup/setup_jax_env.sh
