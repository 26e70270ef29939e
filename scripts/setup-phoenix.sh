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

# shellcheck source=scripts/pinned-venv.sh
. "$(dirname "$0")/pinned-venv.sh"
pinned_venv "$venv" "$here/requirements.txt" "Arize Phoenix"
"$venv/bin/phoenix" --help >/dev/null
