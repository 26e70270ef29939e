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
# The package would start its default cluster as a service; the tests never use it, and a
# machine without an init system (a container) may not start services at all. A policy-rc.d
# that answers 101 tells the package scripts not to start anything (removed again after).
policy=/usr/sbin/policy-rc.d
added_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && added_policy=1
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
if [ -n "$added_policy" ]; then rm -f "$policy"; fi
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || {
  echo "error: postgresql installed but no /usr/lib/postgresql/*/bin/initdb" >&2
  exit 2
}
