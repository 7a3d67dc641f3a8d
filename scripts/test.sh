#!/usr/bin/env bash
# Set up (scripts/setup.sh), check style and types, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/mypy
# Two workers, a test file each at a time (module fixtures such as one daemon or one QMD process
# stay shared within a file): most tests wait on subprocesses and servers. MDRECALL_TEST_WORKERS=0
# runs everything in this process.
exec .venv/bin/python -m pytest -q -n "${MDRECALL_TEST_WORKERS:-2}" --dist loadfile "$@"
