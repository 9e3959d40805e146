#!/usr/bin/env bash
# ensure-patroni.sh — make sure the programs of the Patroni fault suite (faults/patroni/,
# `make failover`) are there: patroni, etcd and haproxy, beside PostgreSQL's server binaries.
#
# Usage: scripts/ensure-patroni.sh
#
# Does nothing when they are all installed. Otherwise, as root on Debian, installs the
# packages patroni, etcd-server, etcd-client and haproxy with apt-get (no recommended
# packages; none of them starts a service here). Fails with a non-zero exit, saying what to
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
"$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" patroni etcd-server etcd-client haproxy
[[ -z $(missing) ]] || die "apt-get ran but these are still missing: $(missing | xargs)"
echo "ensure-patroni: patroni $(patroni --version 2>/dev/null | awk '{print $2}'), $(etcd --version 2>/dev/null | head -1), $(haproxy -v 2>/dev/null | head -1)" >&2
