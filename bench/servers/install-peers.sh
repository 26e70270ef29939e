#!/usr/bin/env bash
# install-peers.sh [PEERS_DIR]: installs the servers `weft serve` is measured against, from npm,
# at pinned versions, into PEERS_DIR (default ~/.cache/weft/peers): n8n and Flowise, each the
# newest release that runs on this machine's Node.js 20. Takes about 10 minutes and 5 GB the
# first time; a version already installed is kept.
#
# Why it is done this way (what a plain `npm install` meets on a machine that reaches only the
# package registries):
# - n8n 1.123.50: the later 1.123.x need isolated-vm 6, which builds only for Node.js 22+; n8n 2.x
#   asks for Node.js 22. Its spreadsheet node depends on a tarball on cdn.sheetjs.com, replaced
#   here by the registry's xlsx 0.18.5 (nothing measured reads spreadsheets).
# - Flowise 3.1.2: 3.1.3 and later ask for Node.js 24.
# - Both install with --ignore-scripts (optional native modules, such as n8n's Kafka client,
#   fail to build here); the one native module each needs, sqlite3 (their default store), is
#   then built from source against the Node.js headers of the system's nodejs package
#   (/usr/include/node), since prebuilt binaries come from GitHub, not the registry.
set -euo pipefail
PEERS=${1:-${WEFT_PEERS_DIR:-$HOME/.cache/weft/peers}}
N8N_VERSION=1.123.50
FLOWISE_VERSION=3.1.2

node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" = 20 ] || echo "install-peers: Node.js $(node --version): the pinned versions are the newest for Node.js 20" >&2
[ -f /usr/include/node/node_api.h ] || { echo "install-peers: no Node.js headers in /usr/include/node (Debian's nodejs package installs them)" >&2; exit 1; }

install() { # name version [overrides JSON]
  local name=$1 version=$2 overrides=${3:-"{}"} dir="$PEERS/$1"
  if [ -f "$dir/node_modules/$name/package.json" ] &&
     [ "$(node -p "require('$dir/node_modules/$name/package.json').version")" = "$version" ] &&
     [ -f "$dir/node_modules/sqlite3/build/Release/node_sqlite3.node" ]; then
    echo "install-peers: $name $version is installed in $dir"
    return
  fi
  echo "install-peers: installing $name $version into $dir"
  rm -rf "$dir" && mkdir -p "$dir"
  printf '{"name": "%s-peer", "private": true, "overrides": %s}\n' "$name" "$overrides" > "$dir/package.json"
  (cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error "$name@$version" &&
    npm_config_nodedir=/usr npm rebuild sqlite3 --loglevel=error)
}

install n8n "$N8N_VERSION" '{"xlsx": "0.18.5"}'
install flowise "$FLOWISE_VERSION"
