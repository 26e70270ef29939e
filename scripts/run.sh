#!/usr/bin/env bash
# Builds `weft` and runs the offline example flow headless (no LLM, no network needed).
# The desktop app arrives with the desktop issue; until then this is the main job headless.
# Extra arguments go to `weft run`, e.g. `bash scripts/run.sh --events`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo is missing; install Rust 1.95 (rustup.rs)" >&2; exit 2; }
cargo build --quiet --release -p weft-cli
exec ./target/release/weft run flows/offline.json --decide review=approve "$@"
