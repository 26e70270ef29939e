#!/usr/bin/env bash
# The Restate server the tests of `weft restate` start (a temporary base directory and free
# loopback ports each): the npm package @restatedev/restate-server, pinned in
# tests/restate/package-lock.json, ships the binary. Quick when already installed.
set -euo pipefail
cd "$(dirname "$0")/../tests/restate"
binary=node_modules/@restatedev/restate-server-linux-x64/bin/restate-server
if [ ! -x "$binary" ]; then
  command -v npm >/dev/null || { echo "error: npm is missing (Node.js 20+)" >&2; exit 2; }
  npm ci --no-audit --no-fund --loglevel=error
fi
"$binary" --version >/dev/null
