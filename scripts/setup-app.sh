#!/usr/bin/env bash
# Everything the desktop app needs besides Rust, installed when missing (quick when present):
# - Debian packages to build a Tauri 2 app (WebKitGTK, GTK) and to drive it headless in tests
#   (Xvfb, WebKitWebDriver); installed with apt-get when running as root, else the exact
#   command is printed and the script stops;
# - tauri-driver (the WebDriver bridge for Tauri apps), from crates.io, with `--tests`;
# - the canvas's npm packages (ui/) and the built canvas (ui/dist, which the app embeds);
# - the end-to-end tests' npm packages (tests/e2e/), with `--tests`.
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=false
[ "${1:-}" = --tests ] && with_tests=true

packages=(libwebkit2gtk-4.1-dev libgtk-3-dev librsvg2-dev libayatana-appindicator3-dev
  libsoup-3.0-dev libxdo-dev libssl-dev pkg-config build-essential file)
if $with_tests; then
  # openssl: the approval-email test makes its SMTP server a certificate. xdotool and GTK for
  # the system Python: the file-drop test drags files onto the app from a window of its own.
  packages+=(xvfb xauth webkit2gtk-driver dbus-x11 at-spi2-core fonts-dejavu-core openssl
    xdotool python3-gi gir1.2-gtk-3.0)
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "== installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "error: the desktop app needs these Debian packages; install them with:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 2
  fi
fi

if $with_tests && ! command -v tauri-driver >/dev/null; then
  echo "== installing tauri-driver 2.1.0"
  cargo install tauri-driver --version 2.1.0 --locked --quiet
fi

command -v npm >/dev/null || { echo "error: npm is missing; install Node.js 20 or newer" >&2; exit 2; }
# Installs the versions package-lock.json pins, when the lock file changed since the last
# install. `npm install` rather than `npm ci`: npm leaves the other platforms' optional builds
# of rollup and esbuild out of a lock file written on Linux, and `npm ci` then refuses it as
# out of sync; `npm install` reads the same lock and leaves it unchanged.
install_npm() {
  local dir="$1"
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    echo "== npm install in $dir (versions from package-lock.json)"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error)
  fi
}
install_npm ui
# Built again only when a source is newer: the app embeds ui/dist, so a new build of it makes
# Cargo compile the app again.
if [ ! -f ui/dist/index.html ] || [ -n "$(find ui/src ui/index.html ui/package.json ui/package-lock.json ui/tsconfig.json ui/vite.config.ts -newer ui/dist/index.html -print -quit)" ]; then
  echo "== building the canvas (ui/dist)"
  (cd ui && npm run --silent build >/dev/null)
fi
if $with_tests; then
  install_npm tests/e2e
fi
