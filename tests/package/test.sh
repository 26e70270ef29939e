#!/usr/bin/env bash
# The package as a person installs it: builds the .deb (scripts/package.sh), installs it with
# apt-get on this machine, checks what it put in place (the app, the `weft` command, the desktop
# entry with the .json association, the icon), runs the installed `weft` on the offline example,
# starts the installed app under Xvfb through WebDriver and runs a flow in it, then removes the
# package. Prints the package's size. Needs root (apt-get), like the rest of the test setup.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
# Built as a person runs it, without the test command's compiler wrapper in the environment:
# scripts/build-release.sh sets it up itself, or the function names below are another build's.
deb="$(env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS bash scripts/package.sh deb | grep '\.deb$' | tail -1)"
[ -f "$deb" ] || { echo "package: no .deb was built" >&2; exit 1; }
name="$(dpkg-deb -f "$deb" Package)"
# The `weft` it carries has its short runs' functions side by side (crates/cli/symbol-order.txt).
bash scripts/symbol-order-check.sh "${CARGO_TARGET_DIR:-$root/target}/release/weft"
# And the app its start's (src-tauri/symbol-order.txt).
bash scripts/symbol-order-check.sh "${CARGO_TARGET_DIR:-$root/target}/release/weft-app" 99 src-tauri/symbol-order.txt
echo "package: $(basename "$deb"): $(du -h "$deb" | cut -f1) ($(dpkg-deb -f "$deb" Installed-Size) KiB installed)"
cleanup() { DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" >/dev/null
for file in /usr/bin/weft-app /usr/bin/weft; do
  [ -x "$file" ] || { echo "package: $file is not installed" >&2; exit 1; }
done
desktop="$(dpkg -L "$name" | grep '\.desktop$' | head -1)"
grep -q '^MimeType=.*application/json' "$desktop" || { echo "package: $desktop does not open .json flows" >&2; exit 1; }
grep -q '^Exec=weft-app' "$desktop" || { echo "package: $desktop does not start weft-app" >&2; cat "$desktop" >&2; exit 1; }
dpkg -L "$name" | grep -q 'icons/.*\.png$' || { echo "package: no icon installed" >&2; exit 1; }

# The installed command runs a flow headless.
tmp="$(mktemp -d)"
trap 'cleanup; rm -rf "$tmp"' EXIT
result="$(/usr/bin/weft run "$root/flows/offline.json" --decide review=approve --db "$tmp/runs.db" 2>/dev/null)"
[ "$result" = "Refunded 120 EUR to Ada." ] || { echo "package: the installed weft printed: $result" >&2; exit 1; }
# Without libgcc_s: its unwinder is linked in (build-support/static-unwinder.rs).
if readelf -d /usr/bin/weft | grep -q 'NEEDED.*libgcc_s'; then
  echo "package: the installed weft loads libgcc_s at every start:" >&2; readelf -d /usr/bin/weft | grep NEEDED >&2; exit 1
fi

# The installed app, driven like a person would (the scripted LLM server from the same build:
# scripts/build-release.sh builds it with the app).
WEFT_APP_PROFILE=release WEFT_APP_BINARY=/usr/bin/weft-app WEFT_E2E_FILE=package.test.mjs \
  bash tests/e2e/run.sh
