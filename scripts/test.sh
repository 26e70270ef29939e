#!/usr/bin/env bash
# Every check CI runs: formatting, lints (warnings are errors), all tests, and a quick pass
# of the benchmarks so they keep compiling and running. `cargo bench -p weft-engine` prints
# the full figures.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo is missing; install Rust 1.95 (rustup.rs)" >&2; exit 2; }
echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== the llama.cpp peer (a PyPI wheel and a tiny generated model; quick once installed)"
WEFT_LLAMA_PYTHON="$(bash tests/llama/setup.sh)" && export WEFT_LLAMA_PYTHON
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "== cargo test"
cargo test --workspace --locked 2>&1 | tee -a "$log"
echo "== benches (quick mode)"
cargo test --workspace --benches --locked 2>&1 | tee -a "$log"
# One closing line for the whole suite (pipefail has already stopped us on a failure).
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$log"
