#!/usr/bin/env bash
# Prints the desktop app's figures: cold start to an interactive canvas, idle memory (RSS of
# the app's processes), the time to open and render a 1,000-node flow, and the size of the
# .deb package, beside a minimal Tauri 2 "hello" window built the same way (tests/hello-tauri),
# so that Weft's own cost shows apart from WebKitGTK's floor. Runs the release builds under Xvfb
# when there is no display (WEFT_APP_PROFILE=debug measures the debug build, without the package
# and the hello window).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-app.sh --tests
profile="${WEFT_APP_PROFILE:-release}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
export CARGO_TARGET_DIR="$target"
if [ "$profile" = release ]; then
  # The package's build holds the scripted LLM server too (scripts/build-release.sh).
  deb="$(bash scripts/package.sh deb | grep '\.deb$' | tail -1)"
  cargo build --quiet --release --manifest-path tests/hello-tauri/Cargo.toml
  export WEFT_APP_PROFILE=release WEFT_HELLO_APP="$target/release/hello-tauri"
  echo "package: $(basename "$deb") $(du -h "$deb" | cut -f1) ($(dpkg-deb -f "$deb" Installed-Size) KiB installed); app binary $(du -h "$target/release/weft-app" | cut -f1), hello binary $(du -h "$target/release/hello-tauri" | cut -f1)"
  # A start-order list the build has lost names of shows here, not as a few MiB more in the figures.
  bash scripts/symbol-order-check.sh "$target/release/weft-app" 0 src-tauri/symbol-order.txt
else
  cargo build --quiet -p weft-app -p weft-scripted-llm
fi
bash tests/e2e/run.sh bench
