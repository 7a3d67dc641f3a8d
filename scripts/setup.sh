#!/usr/bin/env bash
# Create .venv with mdrecall and everything its tests need. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The CPU build of torch: an unpinned torch pulls a multi-GB CUDA build.
.venv/bin/python -m pip install -q "torch==${MDRECALL_TORCH_VERSION:-2.13.0}"
.venv/bin/python -m pip install -q -e ".[${MDRECALL_EXTRAS:-dev}]"
# The example third-party backend (examples/custom-backend): the contract suite selects it by config.
.venv/bin/python -m pip install -q -e examples/custom-backend
# The real QMD for the qmd backend and its tests (.tools/qmd/). Optional: without it (no npm, no
# registry) setup goes on and the QMD tests skip, saying why.
if ! ./scripts/install-qmd.sh >/dev/null; then
  echo "setup: WARNING: QMD could not be installed (see above); the qmd backend's tests will be skipped" >&2
fi
