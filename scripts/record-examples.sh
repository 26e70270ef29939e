#!/usr/bin/env bash
# Records the LLM answers of the example flows' test cases (flows/NAME.recordings/) against the
# scripted LLM server and tests/flow-tests/script.json, so that `weft test flows/` runs them
# offline. Run it after editing a prompt, a model or a case of an example flow.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --workspace --locked --quiet
tmp="$(mktemp -d)"
"$target/debug/scripted-llm" tests/flow-tests/script.json >"$tmp/llm.json" 2>"$tmp/llm.log" &
llm=$!
trap 'kill "$llm" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do [ -s "$tmp/llm.json" ] && break; sleep 0.05; done
base_url="$(sed -n 's/.*"baseUrl":"\([^"]*\)".*/\1/p' "$tmp/llm.json")"
OPENAI_BASE_URL="$base_url" OPENAI_API_KEY="sk-recording" \
  "$target/debug/weft" test flows/ --record --db "$tmp/runs.db"
