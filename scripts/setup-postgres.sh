#!/usr/bin/env bash
# The PostgreSQL server programs the tests of the PostgreSQL run store start (initdb and postgres
# into a temporary directory, on a free loopback port: crates/test-postgres). Debian's package
# also sets up a default cluster; the tests never use it. Quick when already installed.
set -euo pipefail
if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: the PostgreSQL server programs are missing; install the Debian package postgresql (as root)" >&2
  exit 2
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || {
  echo "error: postgresql installed but no /usr/lib/postgresql/*/bin/initdb" >&2
  exit 2
}
