#!/usr/bin/env bash
# Builds Weft's Linux packages with Tauri's bundler: a .deb and an .rpm holding the release
# build of the desktop app and of the `weft` command (/usr/bin/weft), with the icon, a desktop
# entry and the association of .json flow files. Prints the packages' paths, one a line, on
# stdout. `bash scripts/package.sh deb` builds the .deb only.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
bundles="${1:-deb,rpm}"
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"
bash scripts/setup-app.sh >&2
# The command is the `dist` build (Cargo.toml: whole-program optimized, smaller and faster to
# start), the one scripts/bench.sh measures against other engines.
echo "== the weft command (dist)" >&2
cargo build --profile dist --locked -p weft-cli >&2
# The command goes into the packages beside the app; its path depends on the target folder.
config="$(mktemp --suffix=.json)"
trap 'rm -f "$config"' EXIT
cat >"$config" <<JSON
{ "bundle": { "linux": {
  "deb": { "files": { "/usr/bin/weft": "$target/dist/weft" } },
  "rpm": { "files": { "/usr/bin/weft": "$target/dist/weft" } }
} } }
JSON
echo "== the app (release) and its packages: $bundles" >&2
(cd src-tauri && "$root/ui/node_modules/.bin/tauri" build --ci --bundles "$bundles" --config "$config" >&2)
find "$target/release/bundle" -type f \( -name '*.deb' -o -name '*.rpm' \) -newer "$config" | sort
