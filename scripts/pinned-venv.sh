# Sourced by the scripts that set up a test server from PyPI (scripts/setup-phoenix.sh,
# scripts/setup-smtp.sh, tests/llama/setup.sh): `pinned_venv VENV REQUIREMENTS WHAT` makes the
# venv VENV if it is missing and installs REQUIREMENTS into it, running pip only when the file
# changed since the last run (a copy kept in the venv says what it was built from). Everything it
# prints goes to stderr; WHAT names what needs Python in its messages.
pinned_venv() {
  local venv="$1" requirements="$2" what="$3"
  command -v python3 >/dev/null || { echo "error: python3 is needed for $what" >&2; exit 2; }
  if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv" >&2
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" >&2 || {
      echo "error: python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)" >&2
      exit 2
    }
  fi
  if ! cmp -s "$requirements" "$venv/weft-requirements.txt"; then
    echo "== pip install -r $requirements" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" >&2
    cp "$requirements" "$venv/weft-requirements.txt"
  fi
}
