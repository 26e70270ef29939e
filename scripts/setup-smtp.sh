#!/usr/bin/env bash
# aiosmtpd (PyPI), the SMTP server the approval-email tests (crates/cli/tests/it/mail.rs) send
# to and read the emails back from: a venv with the versions pinned in tests/smtp/requirements.txt.
# Quick when already installed: pip runs only when the requirements changed since the last run.
#
# WEFT_SMTP_VENV: where the venv lives (default ~/.cache/weft/smtp-venv).
set -euo pipefail
here="$(cd "$(dirname "$0")/../tests/smtp" && pwd)"
venv="${WEFT_SMTP_VENV:-$HOME/.cache/weft/smtp-venv}"

# shellcheck source=scripts/pinned-venv.sh
. "$(dirname "$0")/pinned-venv.sh"
pinned_venv "$venv" "$here/requirements.txt" "aiosmtpd"
"$venv/bin/python" -m aiosmtpd --version >/dev/null
