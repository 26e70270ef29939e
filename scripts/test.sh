#!/usr/bin/env bash
# Every check CI runs: formatting, lints (warnings are errors), the canvas's type check and
# unit tests, all Rust tests (the run store's on SQLite and on a PostgreSQL server they start), a quick pass of the benchmarks so they keep compiling and
# running, the desktop app's end-to-end tests (the real app under Xvfb through WebDriver), and
# the .deb installed and driven as a person would (tests/package/test.sh; root, for apt-get).
# `cargo bench -p weft-engine`, `bash scripts/bench.sh` and `bash scripts/bench-app.sh` print
# the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo is missing; install Rust 1.95 (rustup.rs)" >&2; exit 2; }
echo "== the desktop app's prerequisites (Debian and npm packages, tauri-driver, ui/dist)"
bash scripts/setup-app.sh --tests
echo "== the canvas: type check and unit tests"
(cd ui && npm run --silent typecheck && npx vitest run --reporter=dot) 2>&1 | tee "${TMPDIR:-/tmp}/weft-ui-tests.log"
echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== PostgreSQL's server programs (the PostgreSQL run store's tests start their own server)"
bash scripts/setup-postgres.sh
echo "== the Restate server (npm @restatedev/restate-server; the tests of weft restate start their own)"
bash scripts/setup-restate.sh
echo "== the llama.cpp peer (a PyPI wheel and a tiny generated model; quick once installed)"
WEFT_LLAMA_PYTHON="$(bash tests/llama/setup.sh)" && export WEFT_LLAMA_PYTHON
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "== cargo test"
cargo test --workspace --locked 2>&1 | tee -a "$log"
echo "== benches (quick mode)"
cargo test --workspace --benches --locked 2>&1 | tee -a "$log"
echo "== the desktop app end to end (WebDriver under Xvfb)"
# `cargo test` has built target/debug/weft-app and scripted-llm (their packages have tests).
bash tests/e2e/run.sh 2>&1 | tee -a "$log"
echo "== the desktop app end to end with its run store on PostgreSQL"
cargo build -p weft-test-postgres --locked
WEFT_E2E_POSTGRES=1 WEFT_E2E_FILE=postgres.test.mjs bash tests/e2e/run.sh 2>&1 | tee -a "$log"
# Every test that uses the debug builds has run. A cold target holds ~4.5 GB of them and the
# package's release and dist builds take ~4 GB more: a CI machine that has room for either but
# not both (one CI run failed so, half an hour in) is asked to drop them (.ci/run sets this
# for a target inside its fresh clone, never for a target kept between runs).
if [ "${WEFT_TEST_DROP_DEBUG_BUILDS:-}" = 1 ]; then
  echo "== removing the debug builds before the release ones"
  rm -rf "${CARGO_TARGET_DIR:-target}/debug"
fi
echo "== the package: build the .deb (release), install it with apt-get, run the installed app"
bash tests/package/test.sh 2>&1 | tee -a "$log"
# One closing line for the whole suite (pipefail has already stopped us on a failure).
ui_passed="$(sed -n 's/.*Tests *\([0-9]*\) passed.*/\1/p' "${TMPDIR:-/tmp}/weft-ui-tests.log" | tail -1)"
awk -v ui="${ui_passed:-0}" '/^test result:/ { passed += $4; failed += $6 }
  /^e2e: / { passed += $2; failed += $4 }
  END { printf "tests: %d passed, %d failed\n", passed + ui, failed }' "$log"
