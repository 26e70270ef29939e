#!/usr/bin/env bash
# `run.sh`: the desktop app's end-to-end tests: the real app (with the UI embedded), driven
# through WebDriver (tauri-driver + WebKitWebDriver) against the scripted LLM server; prints
# one line "e2e: N passed, N failed" at the end.
# `run.sh bench`: the app's benchmark (cold start, idle memory, a 1,000-node flow).
# Starts Xvfb when there is no display. Expects `weft-app` and `scripted-llm` to be built
# (scripts/test.sh and scripts/bench-app.sh build them); WEFT_APP_PROFILE picks debug
# (default) or release.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
# WEFT_APP_BINARY picks another build of the app (the installed package's, say).
app="${WEFT_APP_BINARY:-$target/${WEFT_APP_PROFILE:-debug}/weft-app}"
llm="$target/${WEFT_APP_PROFILE:-debug}/scripted-llm"
for binary in "$app" "$llm"; do
  [ -x "$binary" ] || { echo "e2e: $binary is not built (cargo build -p weft-app -p weft-scripted-llm)" >&2; exit 1; }
done
command -v tauri-driver >/dev/null || { echo "e2e: tauri-driver is missing (cargo install tauri-driver --version 2.1.0 --locked)" >&2; exit 1; }
command -v WebKitWebDriver >/dev/null || { echo "e2e: WebKitWebDriver is missing (apt-get install webkit2gtk-driver)" >&2; exit 1; }

tmp="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

if [ -z "${DISPLAY:-}" ]; then
  display=":$((90 + RANDOM % 9))"
  Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp >"$tmp/xvfb.log" 2>&1 &
  pids+=($!)
  export DISPLAY="$display"
  for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X${display#:}" ] && break; sleep 0.1; done
fi

"$llm" "$here/script.json" >"$tmp/llm.json" 2>"$tmp/llm.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/llm.json" ] && break; sleep 0.05; done
base_url="$(sed -n 's/.*"baseUrl":"\([^"]*\)".*/\1/p' "$tmp/llm.json")"
root_url="$(sed -n 's/.*"rootUrl":"\([^"]*\)".*/\1/p' "$tmp/llm.json")"
[ -n "$base_url" ] || { echo "e2e: the scripted LLM server did not start" >&2; cat "$tmp/llm.log" >&2; exit 1; }

port="${TAURI_DRIVER_PORT:-4444}"
export OPENAI_BASE_URL="$base_url" OPENAI_API_KEY="sk-e2e-not-a-real-key"
db="$tmp/runs.db"
# WEFT_E2E_POSTGRES=1: the run store is a database of a throwaway PostgreSQL server instead.
if [ "${WEFT_E2E_POSTGRES:-}" = 1 ]; then
  pg="$target/${WEFT_APP_PROFILE:-debug}/weft-test-postgres"
  [ -x "$pg" ] || { echo "e2e: $pg is not built (cargo build -p weft-test-postgres)" >&2; exit 1; }
  # It keeps the server until the cleanup kills it.
  "$pg" >"$tmp/postgres.url" 2>"$tmp/postgres.log" &
  pids+=($!)
  for _ in $(seq 600); do [ -s "$tmp/postgres.url" ] && break; sleep 0.1; done
  db="$(head -n 1 "$tmp/postgres.url")"
  [ -n "$db" ] || { echo "e2e: the PostgreSQL server did not start" >&2; cat "$tmp/postgres.log" >&2; exit 1; }
fi
export WEFT_DB="$db" WEFT_CONFIG_DIR="$tmp/config" WEFT_E2E_TMP="$tmp"
# Screenshots of the tests' key moments (and of a failure), kept after the run, outside git.
export WEFT_E2E_SCREENSHOTS="${WEFT_E2E_SCREENSHOTS:-$target/e2e-screenshots}"
# The webview keeps its local storage (the remembered layout) under XDG_DATA_HOME: each
# run starts from a fresh one, as a new user would.
export XDG_DATA_HOME="$tmp/data"
export WEFT_APP_BINARY="$app" TAURI_DRIVER_PORT="$port" WEFT_E2E_LLM_ROOT="$root_url"
# WebKit's sandbox needs user namespaces that containers often lack.
export WEBKIT_DISABLE_SANDBOX_THIS_IS_DANGEROUS=1
# Who decides an approval comes from the app's Settings alone, as on a machine with no login
# name: the tests see the same on every machine.
# WebKitWebDriver listens on the next port (tauri-driver's own default is always 4445): two runs
# with different TAURI_DRIVER_PORTs then do not take each other's.
env -u WEFT_USER -u USER tauri-driver --port "$port" --native-port "$((port + 1))" >"$tmp/driver.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

cd "$here"
[ -d node_modules ] || npm install --no-audit --no-fund --loglevel=error
if [ "${1:-}" = bench ]; then
  node bench.mjs
  exit
fi
# WEFT_E2E_FILE picks the test files, WEFT_E2E_NAME the tests whose names match a pattern.
filter=()
[ -n "${WEFT_E2E_NAME:-}" ] && filter=(--test-name-pattern="$WEFT_E2E_NAME")
set +e
node --test --test-concurrency=1 --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tmp/tap" ${filter[@]+"${filter[@]}"} ${WEFT_E2E_FILE:-app.test.mjs tools.test.mjs look.test.mjs}
status=$?
set -e
passed="$(grep '^ok ' "$tmp/tap" | grep -vc '# SKIP' || true)"
failed="$(grep -c '^not ok ' "$tmp/tap" || true)"
if [ "$status" -ne 0 ]; then
  echo "--- tauri-driver log ---" >&2; tail -n 40 "$tmp/driver.log" >&2
fi
echo "e2e: $passed passed, $failed failed (screenshots in $WEFT_E2E_SCREENSHOTS)"
exit "$status"
