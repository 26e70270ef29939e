#!/usr/bin/env bash
# The one shipped build: `weft`, the app and the scripted LLM server (which the package's test
# and the benchmarks drive them with), built together with Cargo.toml's `release` profile. One
# build for all three: their dependencies are compiled once with the same features (so the
# function names crates/cli/symbol-order.txt lists are the ones this build has), and the
# programs' whole-program optimizations run side by side. scripts/package.sh, scripts/bench.sh
# and scripts/symbol-order.sh all build through here.
set -euo pipefail
cd "$(dirname "$0")/.."
# Built as the test command builds it, with clippy's driver as the workspace's compiler wrapper:
# the wrapper is part of every workspace crate's hash, and so of its functions' names. Without
# it a package or a bench would have other names than the ones the start-order lists
# (crates/cli/symbol-order.txt, src-tauri/symbol-order.txt) were traced from, and half of each
# start's functions would be out of order.
# shellcheck source=scripts/clippy-wrapper.sh
source scripts/clippy-wrapper.sh
# The app embeds the built canvas.
[ -f ui/dist/index.html ] || bash scripts/setup-app.sh >&2
cargo build --release --locked -p weft-cli -p weft-app -p weft-scripted-llm "$@" >&2
