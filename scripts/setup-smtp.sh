#!/usr/bin/env bash
# aiosmtpd (PyPI), the SMTP server the approval-email tests (crates/cli/tests/it/mail.rs) send
# to and read the emails back from: a venv with the versions pinned in tests/smtp/requirements.txt.
# Quick when already installed: pip runs only when the requirements changed since the last run.
#
# WEFT_SMTP_VENV: where the venv lives (default ~/.cache/weft/smtp-venv).
set -euo pipefail
here="$(cd "$(dirname "$0")/../tests/smtp" && pwd)"
venv="${WEFT_SMTP_VENV:-$HOME/.cache/weft/smtp-venv}"
python="$venv/bin/python"

command -v python3 >/dev/null || { echo "error: python3 is needed for aiosmtpd" >&2; exit 2; }

if [ ! -x "$python" ]; then
  echo "== creating $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2 || {
    echo "error: python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)" >&2
    exit 2
  }
fi

if ! cmp -s "$here/requirements.txt" "$venv/weft-requirements.txt"; then
  echo "== pip install -r tests/smtp/requirements.txt" >&2
  "$python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  cp "$here/requirements.txt" "$venv/weft-requirements.txt"
fi
"$python" -m aiosmtpd --version >/dev/null
