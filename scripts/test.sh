#!/usr/bin/env bash
# Set up (scripts/setup.sh), check style and types, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/mypy
exec .venv/bin/python -m pytest -q "$@"
