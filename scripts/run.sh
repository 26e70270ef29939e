#!/usr/bin/env bash
# Opens the desktop app: installs what it needs (Debian packages, npm packages), builds the
# canvas and the app, and starts it with the offline example flow open (it runs without an
# LLM: press Run, then approve or reject at the review); another flow file may be given. On a machine without a display it says so and runs the
# main job headless instead: `weft` on the offline example flow (no LLM, no network needed).
# Extra arguments go to `weft run` in the headless case, e.g. `bash scripts/run.sh --events`;
# with a display, the first one is the flow file to open.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo is missing; install Rust 1.95 (rustup.rs)" >&2; exit 2; }
target="${CARGO_TARGET_DIR:-target}"
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  echo "no display here (DISPLAY is not set), so the desktop app cannot open;" >&2
  echo "running the main job headless instead: weft run flows/offline.json --decide review=approve" >&2
  echo "(the app's tests run it under Xvfb: bash scripts/test.sh)" >&2
  cargo build --quiet --release -p weft-cli
  exec "$target/release/weft" run flows/offline.json --decide review=approve "$@"
fi
bash scripts/setup-app.sh
cargo build --quiet -p weft-app
echo "opening Weft (flows to try are in flows/; runs are stored where \`weft\` stores them)" >&2
exec "$target/debug/weft-app" "${1:-flows/offline.json}"
