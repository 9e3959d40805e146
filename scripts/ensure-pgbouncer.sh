#!/usr/bin/env bash
# ensure-pgbouncer.sh — make sure PgBouncer is there for the tests that run terdut-server
# behind a transaction-mode pooler (test/harness/pgbouncertest, `make test`).
#
# Usage: scripts/ensure-pgbouncer.sh
#
# Does nothing when pgbouncer is installed (on PATH or as Debian's /usr/sbin/pgbouncer).
# Otherwise, as root on Debian, installs the package pgbouncer with apt-get (no recommended
# packages) and starts no service: the install runs under a policy-rc.d that denies every
# start, and on a systemd host, where the package enables its unit, the unit is disabled and
# stopped. The tests start their own PgBouncer on loopback. Not as root, or off Debian, fails
# with a non-zero exit saying what to install.
set -euo pipefail

die() { echo "ensure-pgbouncer: $*" >&2; exit 1; }

# TERDUT_PGBOUNCER_DEBIAN moves Debian's path, for the tests only.
debian=${TERDUT_PGBOUNCER_DEBIAN:-/usr/sbin/pgbouncer}
found() { command -v pgbouncer >/dev/null || [[ -x $debian ]]; }

if found; then
  exit 0
fi
if [[ ! -r /etc/debian_version ]]; then
  die "missing: pgbouncer; install PgBouncer 1.18 or later with your system's packages"
fi
"$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" --no-start pgbouncer
state=$(systemctl is-system-running 2>/dev/null || true)
if [[ -n $state && $state != offline ]] && systemctl cat pgbouncer.service >/dev/null 2>&1; then
  systemctl disable --now pgbouncer.service >/dev/null 2>&1 ||
    echo "ensure-pgbouncer: could not disable and stop pgbouncer.service; check: systemctl status pgbouncer" >&2
fi
found || die "apt-get ran but pgbouncer is still missing"
bin=$(command -v pgbouncer || echo "$debian")
echo "ensure-pgbouncer: $("$bin" --version 2>/dev/null | head -1)" >&2
