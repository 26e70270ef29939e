#!/usr/bin/env bash
# Prints the desktop app's figures: cold start to an interactive canvas, idle memory (RSS of
# the app's processes) and the time to open and render a 1,000-node flow. Runs the release
# build under Xvfb when there is no display (WEFT_APP_PROFILE=debug measures the debug build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-app.sh --tests
profile="${WEFT_APP_PROFILE:-release}"
if [ "$profile" = release ]; then
  cargo build --quiet --release -p weft-app -p weft-scripted-llm
  export WEFT_APP_PROFILE=release
else
  cargo build --quiet -p weft-app -p weft-scripted-llm
fi
bash tests/e2e/run.sh bench
