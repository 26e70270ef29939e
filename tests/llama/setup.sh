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

# shellcheck source=scripts/pinned-venv.sh
. "$here/../../scripts/pinned-venv.sh"
pinned_venv "$venv" "$here/requirements.txt" "tests/llama"

# The copy of make_model.py kept in the venv says what the model was written by.
if [ ! -s "$model" ] || ! cmp -s "$here/make_model.py" "$venv/weft-make_model.py"; then
  echo "== writing $model" >&2
  "$python" "$here/make_model.py" "$model.tmp" >&2
  mv "$model.tmp" "$model"
  cp "$here/make_model.py" "$venv/weft-make_model.py"
fi

echo "$python"
