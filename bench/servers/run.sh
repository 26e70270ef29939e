#!/usr/bin/env bash
# bench/servers/run.sh [run_servers.py options]: `weft serve` against n8n and Flowise, the
# servers teams deploy instead, in one run (README.md beside this says what is measured and how).
# Installs the peers (install-peers.sh), builds Weft's release, then prints one table. Options
# pass through: --clients 1,16,64,256, --rounds 3, --systems weft-hook,weft-runs,n8n,flowise,
# --delay-ms 50, --json OUT.json. Run it on a quiet machine: nothing else using the cores.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PEERS=${WEFT_PEERS_DIR:-$HOME/.cache/weft/peers}
bash "$ROOT/bench/servers/install-peers.sh" "$PEERS"
bash "$ROOT/scripts/build-release.sh"
target=${CARGO_TARGET_DIR:-$ROOT/target}
echo "# weft serve vs n8n and Flowise — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
echo "# weft $(git -C "$ROOT" describe --always --dirty) (release); node $(node --version)"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$ROOT/bench/servers/run_servers.py" --weft "$target/release/weft" --llm "$target/release/scripted-llm" \
  --peers "$PEERS" "$@"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
