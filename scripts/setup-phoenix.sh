#!/usr/bin/env bash
# Arize Phoenix (PyPI `arize-phoenix`), the OpenTelemetry tracing backend the traces test
# (crates/cli/tests/it/traces.rs) exports to and reads spans back from: a venv with the
# versions pinned in tests/phoenix/requirements.txt. Quick when already installed: pip runs
# only when the requirements changed since the last run.
#
# WEFT_PHOENIX_VENV: where the venv lives (default ~/.cache/weft/phoenix-venv).
set -euo pipefail
here="$(cd "$(dirname "$0")/../tests/phoenix" && pwd)"
venv="${WEFT_PHOENIX_VENV:-$HOME/.cache/weft/phoenix-venv}"
python="$venv/bin/python"

command -v python3 >/dev/null || { echo "error: python3 (3.10 or newer) is needed for Arize Phoenix" >&2; exit 2; }

if [ ! -x "$python" ]; then
  echo "== creating $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2 || {
    echo "error: python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)" >&2
    exit 2
  }
fi

if ! cmp -s "$here/requirements.txt" "$venv/weft-requirements.txt"; then
  echo "== pip install -r tests/phoenix/requirements.txt" >&2
  "$python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  cp "$here/requirements.txt" "$venv/weft-requirements.txt"
fi
"$venv/bin/phoenix" --help >/dev/null
