#!/usr/bin/env bash
# The GPU check on a machine without network and without .venv (make bench-gpu WHEELS=.whl runs this; the
# device command of docs/performance.md, "The GPU check", runs it directly, needing no make):
#   bash bench/gpu/run.sh RESULTS_DIR [a3c bench options...]
# Installs the wheels of .whl/ (bench/gpu/prepare.sh) into /tmp/a3c-site (pip, else unzipped: a wheel is a
# zip), links envs/ there as a3c_envs (the package's name once installed), then runs a3c bench --gpu with
# the first of PYTHON, /opt/torch/.venv/bin/python3 and python3 that imports torch, and
# --commit from .whl/COMMIT (the machine's copy of the tree has no git). Its output also goes to
# RESULTS_DIR/bench-gpu.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
results=${1:?usage: bench/gpu/run.sh RESULTS_DIR [a3c bench options...]}
shift
wheels=${WHEELS:-.whl}
site=${GPU_SITE:-/tmp/a3c-site}
python=
for candidate in ${PYTHON:-} /opt/torch/.venv/bin/python3 python3; do  # the first that has torch
    if "$candidate" -c 'import torch' 2>/dev/null; then python=$candidate && break; fi
done
if [ -z "$python" ]; then
    echo "bench/gpu/run.sh: no python here imports torch (tried ${PYTHON:-} /opt/torch/.venv/bin/python3 python3)" >&2
    exit 1
fi
mkdir -p "$site" "$results"
if "$python" -m pip --version >/dev/null 2>&1; then
    "$python" -m pip install --quiet --no-index --no-deps --target "$site" "$wheels"/*.whl
else
    for wheel in "$wheels"/*.whl; do "$python" -m zipfile -e "$wheel" "$site"; done
fi
ln -sfn "$PWD/envs" "$site/a3c_envs"
commit=()
if [ -f "$wheels/COMMIT" ]; then commit=(--commit "$(cat "$wheels/COMMIT")"); fi
torch=$("$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda, torch.cuda.is_available())')
echo "bench/gpu/run.sh: $("$python" --version) at $python, torch $torch; wheels of $wheels in $site" \
    | tee "$results/bench-gpu.log"
PYTHONPATH="$site:$PWD" "$python" -m a3c bench --gpu --out "$results" ${commit[@]+"${commit[@]}"} "$@" 2>&1 \
    | tee -a "$results/bench-gpu.log"
