#!/usr/bin/env bash
# Builds Weft's Linux packages with Tauri's bundler: a .deb and an .rpm holding the release
# builds of the desktop app and of the `weft` command (/usr/bin/weft), with the icon, a desktop
# entry and the association of .json flow files. Prints the packages' paths, one a line, on
# stdout. `bash scripts/package.sh deb` builds the .deb only.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
bundles="${1:-deb,rpm}"
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"
bash scripts/setup-app.sh >&2
echo "== the weft command and the app (release)" >&2
bash scripts/build-release.sh
# The command goes into the packages beside the app; its path depends on the target folder.
config="$(mktemp --suffix=.json)"
trap 'rm -f "$config"' EXIT
cat >"$config" <<JSON
{ "bundle": { "linux": {
  "deb": { "files": { "/usr/bin/weft": "$target/release/weft" } },
  "rpm": { "files": { "/usr/bin/weft": "$target/release/weft" } }
} } }
JSON
echo "== the packages: $bundles" >&2
(cd src-tauri && "$root/ui/node_modules/.bin/tauri" bundle --ci --bundles "$bundles" --config "$config" >&2)
find "$target/release/bundle" -type f \( -name '*.deb' -o -name '*.rpm' \) -newer "$config" | sort
