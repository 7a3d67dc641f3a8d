#!/usr/bin/env bash
# Set up (the CPU model, no GPU packages), index a copy of the example workspace, ask it a few
# questions, write a memory and find it again, and check the setup.
set -euo pipefail
cd "$(dirname "$0")/.."
MDRECALL_EXTRAS=local ./scripts/setup.sh
export MDRECALL_HOME="${MDRECALL_HOME:-$PWD/.mdrecall-demo}"
M=.venv/bin/mdrecall
WS="$MDRECALL_HOME/workspace"
rm -rf "$WS" && mkdir -p "$MDRECALL_HOME" && cp -r examples/workspace "$WS"   # remember writes into it
show() { echo; echo "\$ mdrecall $*"; "$M" "$@" || true; }
"$M" index -w "$WS"
show search -w "$WS" -n 3 "which database do we use?"
show search -w "$WS" -n 2 --explain "what did we decide about Safari?"
show search -w "$WS" -n 2 "谁不喝咖啡？"
show remember -w "$WS" "The demo ran on $(date +%Y-%m-%d); the kumquat crate arrives on Friday."
show search -w "$WS" -n 1 "when does the kumquat crate arrive?"
show doctor -w "$WS"
