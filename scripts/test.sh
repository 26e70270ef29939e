#!/usr/bin/env bash
# Every check CI runs, in stages; prints each stage's time at the end.
#
#   bash scripts/test.sh                 every stage
#   bash scripts/test.sh lint rust       only these stages (setup runs what they need)
#
# Stages:
#   lint     cargo fmt --check, the crates' layers and import circles (scripts/check-layers.py)
#   canvas   the canvas's type check and unit tests (vitest)
#   rust     every Rust target built once with the shipped (`release`) profile and linted by
#            clippy as it compiles (warnings are errors), then every Rust test, the store's on
#            SQLite and on a PostgreSQL server they start, `weft restate`'s on a Restate
#            server, the benches in quick mode
#   e2e      the desktop app end to end under Xvfb through WebDriver, on SQLite and PostgreSQL
#   package  the .deb of that same build, installed with apt-get, the installed app driven
#            (root, for apt-get)
# The tests run what is shipped: the `weft` and the app they drive are the ones the package
# holds, built once. `cargo test` without `--release` (the dev profile) is for day-to-day work.
# `cargo bench`, `bash scripts/bench.sh` and `bash scripts/bench-app.sh` print the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo is missing; install Rust 1.95 (rustup.rs)" >&2; exit 2; }
all=(lint canvas rust e2e package)
stages=("$@")
[ "${#stages[@]}" -gt 0 ] || stages=("${all[@]}")
for stage in "${stages[@]}"; do
  [[ " ${all[*]} " == *" $stage "* ]] || { echo "error: no stage \`$stage\` (the stages: ${all[*]})" >&2; exit 2; }
done
wants() { [[ " ${stages[*]} " == *" $1 "* ]]; }

# Each stage's time, printed at the end (also when a stage fails).
timings=()
stage_started=0
stage_name=""
begin() {
  finish
  stage_name="$1"
  stage_started=$SECONDS
  echo "== $1"
}
finish() {
  if [ -n "$stage_name" ]; then
    timings+=("$(printf '%-48s %4d:%02d' "$stage_name" $(((SECONDS - stage_started) / 60)) $(((SECONDS - stage_started) % 60)))")
    stage_name=""
  fi
}
report_times() {
  finish
  echo "== stage times (total $((SECONDS / 60)):$(printf '%02d' $((SECONDS % 60))))"
  printf '  %s\n' "${timings[@]}"
}
log="$(mktemp)"
trap 'report_times; rm -f "$log"' EXIT

# Clippy lints every workspace crate as it is compiled for the tests (its driver is the
# workspace's compiler wrapper, as `cargo clippy` makes it), rather than in a second, check-only
# compilation of the whole workspace and its dependencies. Every cargo command below keeps the
# same wrapper (the package's build included), so none compiles the workspace again.
lint_while_building() {
  # shellcheck source=scripts/clippy-wrapper.sh
  source scripts/clippy-wrapper.sh
}

if wants canvas || wants rust || wants e2e || wants package; then
  begin "set-up: the app's Debian and npm packages"
  if wants e2e || wants package; then bash scripts/setup-app.sh --tests; else bash scripts/setup-app.sh; fi
fi

if wants lint; then
  begin "lint: format, layers and import circles"
  cargo fmt --all --check
  python3 scripts/check-layers.py
fi

if wants canvas; then
  begin "canvas: type check and unit tests"
  (cd ui && npm run --silent typecheck && npx vitest run --reporter=dot) 2>&1 | tee "${TMPDIR:-/tmp}/weft-ui-tests.log"
fi

if wants rust; then
  # The servers the tests start are installed while the workspace compiles (downloads and
  # package installs leave a core free most of the time).
  begin "rust: build and lint every target (release)"
  servers_log="$(mktemp)"
  (bash scripts/setup-postgres.sh && bash scripts/setup-restate.sh && bash scripts/setup-mcp.sh && bash scripts/setup-phoenix.sh && bash scripts/setup-smtp.sh && bash tests/llama/setup.sh >"$servers_log.python") >"$servers_log" 2>&1 &
  servers=$!
  lint_while_building
  cargo build --workspace --all-targets --locked --release
  if ! wait "$servers"; then
    cat "$servers_log" >&2
    echo "error: the test servers could not be installed" >&2
    exit 1
  fi
  WEFT_LLAMA_PYTHON="$(tail -1 "$servers_log.python")" && export WEFT_LLAMA_PYTHON
  begin "rust: every test (benches in quick mode)"
  cargo test --workspace --all-targets --locked --release 2>&1 | tee -a "$log"
fi

if wants e2e; then
  begin "e2e: the desktop app through WebDriver"
  # The MCP servers the app's tool tests start (installed already when the rust stage ran).
  bash scripts/setup-mcp.sh
  lint_while_building
  # The app, `weft`, the scripted LLM server and the throwaway PostgreSQL: what the rust stage
  # built (the same command, so nothing is built again when it ran).
  cargo build --workspace --all-targets --locked --release
  export WEFT_APP_PROFILE=release
  bash tests/e2e/run.sh 2>&1 | tee -a "$log"
  begin "e2e: the app with its run store on PostgreSQL"
  WEFT_E2E_POSTGRES=1 WEFT_E2E_FILE=postgres.test.mjs bash tests/e2e/run.sh 2>&1 | tee -a "$log"
fi

if wants package; then
  begin "package: build, install and drive the .deb"
  # The same wrapper as the build the tests ran: the package holds what they tested.
  lint_while_building
  bash tests/package/test.sh 2>&1 | tee -a "$log"
fi

# One closing line for the whole suite (pipefail has already stopped us on a failure).
finish
ui_passed=""
if wants canvas; then
  ui_passed="$(sed -n 's/.*Tests *\([0-9]*\) passed.*/\1/p' "${TMPDIR:-/tmp}/weft-ui-tests.log" | tail -1)"
fi
awk -v ui="${ui_passed:-0}" '/^test result:/ { passed += $4; failed += $6 }
  /^e2e: / { passed += $2; failed += $4 }
  END { printf "tests: %d passed, %d failed\n", passed + ui, failed }' "$log"
