#!/usr/bin/env bash
# Prepares `make bench-gpu WHEELS=.whl` for a GPU machine with no network whose python3 (3.12) holds torch,
# numpy, click, tqdm, cloudpickle, pytest and opencv but not what Pong and the tests need besides: downloads
# those wheels (Python 3.12, manylinux x86_64, the versions installed in PYTHON's environment) into .whl/ at
# the repo root (git-ignored, carried to the machine by the run tool's carry: [".whl"]) and writes
# .whl/COMMIT, the commit measured (the machine's copy of the tree has no git). Run it right before the
# device command, after the last commit: docs/performance.md, "The GPU check".
# Usage: bench/gpu/prepare.sh  (PYTHON=path/to/python when the repo's .venv is elsewhere)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
WHEEL_PYTHON=${WHEEL_PYTHON:-3.12}  # the python of the GPU machine (3.11 to try the install here)
PACKAGES=(gymnasium ale-py farama-notifications pytest-timeout)
MAX_MIB=60

rm -rf .whl && mkdir .whl
for name in "${PACKAGES[@]}"; do
    version=$("$PYTHON" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name")
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$WHEEL_PYTHON" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "$name==$version"
done
commit=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain)" ]; then commit="$commit+dirty"; fi
echo "$commit" > .whl/COMMIT
mib=$(du -sm .whl | cut -f1)
ls -l .whl
echo "prepare: .whl/ holds ${mib} MiB for commit $commit"
if [ "$mib" -ge "$MAX_MIB" ]; then
    echo "prepare: .whl/ is ${mib} MiB, over the ${MAX_MIB} MiB this check allows (carry takes 64 MiB)" >&2
    exit 1
fi
