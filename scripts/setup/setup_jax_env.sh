#!/usr/bin/env bash
# Create (or reuse) the JAX worker's own environment (.venv-jax; DLBENCH_JAX_VENV overrides).
# JAX needs numpy >= 2 and MXNet 1.9.1 numpy < 2, so they cannot share .venv. framework=jax runs its worker
# here unless the interpreter running dlbench can import jax itself (docs/architecture.md, "JAX").
# Idempotent: its own stamp records the hash of requirements-jax.txt and this script.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${1:-${DLBENCH_JAX_VENV:-.venv-jax}}"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null || py=python3
stamp="$venv/.dlbench-requirements"
want=$(cat requirements-jax.txt scripts/setup/setup_jax_env.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "setup: $venv is up to date"
  exit 0
fi
echo "setup: installing JAX into $venv"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade pip wheel setuptools
"${pip[@]}" install -q -r requirements-jax.txt
echo "$want" > "$stamp"
echo "setup: done ($venv)"
