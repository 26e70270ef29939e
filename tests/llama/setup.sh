#!/usr/bin/env bash
# Prepares the real llama.cpp server that crates/engine/tests/it/llama_peer.rs runs the OpenAI
# client against: a venv with xllamacpp (prebuilt llama.cpp) and gguf from requirements.txt,
# and a tiny random-weight model written by make_model.py (no download).
#
# Idempotent: pip runs only when requirements.txt changed since the last run, and the model is
# written only when it is missing or make_model.py changed. Prints the venv's python on stdout
# (everything else goes to stderr), so `WEFT_LLAMA_PYTHON="$(bash tests/llama/setup.sh)"` works.
#
# WEFT_LLAMA_VENV: where the venv lives (default ~/.cache/weft/llama-venv).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${WEFT_LLAMA_VENV:-$HOME/.cache/weft/llama-venv}"
python="$venv/bin/python"
model="$venv/tiny-llama.gguf"

command -v python3 >/dev/null || { echo "error: python3 (3.11 or newer) is needed for tests/llama" >&2; exit 2; }

if [ ! -x "$python" ]; then
  echo "== creating $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2 || {
    echo "error: python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)" >&2
    exit 2
  }
fi

# The copies of requirements.txt and make_model.py kept in the venv say what it was built from.
if ! cmp -s "$here/requirements.txt" "$venv/weft-requirements.txt"; then
  echo "== pip install -r tests/llama/requirements.txt" >&2
  "$python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  cp "$here/requirements.txt" "$venv/weft-requirements.txt"
fi

if [ ! -s "$model" ] || ! cmp -s "$here/make_model.py" "$venv/weft-make_model.py"; then
  echo "== writing $model" >&2
  "$python" "$here/make_model.py" "$model.tmp" >&2
  mv "$model.tmp" "$model"
  cp "$here/make_model.py" "$venv/weft-make_model.py"
fi

echo "$python"
