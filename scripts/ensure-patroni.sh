#!/usr/bin/env bash
# ensure-patroni.sh — make sure the programs of the Patroni fault suite (test/faults/patroni/,
# `make failover`) are there: patroni, etcd and haproxy, beside PostgreSQL's server binaries.
#
# Usage: scripts/ensure-patroni.sh
#
# Does nothing when they are all installed. Otherwise, as root on Debian, installs the
# packages patroni, etcd-server, etcd-client and haproxy with apt-get (no recommended
# packages) and starts none of their services: the install runs under a policy-rc.d that
# denies every start, and on a systemd host, where the packages enable their units (etcd
# would then listen unauthenticated on 2379 at every boot), the units are disabled and
# stopped. The fault suite starts its own etcd, Patroni and HAProxy on loopback. Fails with a non-zero exit, saying what to
# install, when a program is missing and cannot be installed.
set -euo pipefail

die() { echo "ensure-patroni: $*" >&2; exit 1; }

missing() {
  local p
  for p in patroni etcd etcdctl haproxy; do
    command -v "$p" >/dev/null || echo "$p"
  done
}

if [[ -z $(missing) ]]; then
  exit 0
fi
if [[ ! -r /etc/debian_version ]]; then
  die "missing: $(missing | xargs); install Patroni 3, etcd 3.4 or later and HAProxy 2 with your system's packages"
fi
"$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" --no-start patroni etcd-server etcd-client haproxy
state=$(systemctl is-system-running 2>/dev/null || true)
if [[ -n $state && $state != offline ]]; then
  for unit in etcd.service haproxy.service patroni.service; do
    systemctl cat "$unit" >/dev/null 2>&1 || continue # not shipped: nothing to stop
    systemctl disable --now "$unit" >/dev/null 2>&1 ||
      echo "ensure-patroni: could not disable and stop $unit; check: systemctl status $unit" >&2
  done
fi
[[ -z $(missing) ]] || die "apt-get ran but these are still missing: $(missing | xargs)"
echo "ensure-patroni: patroni $(patroni --version 2>/dev/null | awk '{print $2}'), $(etcd --version 2>/dev/null | head -1), $(haproxy -v 2>/dev/null | head -1)" >&2
