#!/usr/bin/env bash
# The real MCP servers the tests start (@modelcontextprotocol/server-everything and
# server-filesystem) and the TypeScript SDK whose client drives `weft mcp`: npm packages
# pinned in tests/mcp/package-lock.json. Quick when already installed.
set -euo pipefail
cd "$(dirname "$0")/../tests/mcp"
if [ ! -x node_modules/.bin/mcp-server-everything ] || [ ! -x node_modules/.bin/mcp-server-filesystem ]; then
  command -v npm >/dev/null || { echo "error: npm is missing (Node.js 20+)" >&2; exit 2; }
  npm ci --no-audit --no-fund --loglevel=error
fi
