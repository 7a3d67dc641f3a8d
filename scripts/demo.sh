#!/usr/bin/env bash
# Set up, index the example workspace with the local model, and ask it a few questions.
set -euo pipefail
cd "$(dirname "$0")/.."
MDRECALL_EXTRAS=local ./scripts/setup.sh
export MDRECALL_HOME="${MDRECALL_HOME:-$PWD/.mdrecall-demo}"
WS=examples/workspace
.venv/bin/mdrecall index -w "$WS"
for q in "which database do we use?" "what did we decide about Safari?" "谁不喝咖啡？"; do
  echo
  echo "\$ mdrecall search \"$q\" -n 3"
  .venv/bin/mdrecall search -w "$WS" -n 3 "$q" || true
done
echo
.venv/bin/mdrecall status -w "$WS"
