#!/usr/bin/env bash
# ensure-kube.sh — make sure the programs of the Kubernetes suite (`make kube`) are there:
# Debian's etcd, under the real kube-apiserver that test/harness/kubetest builds from its Go module
# (k8s.io/kubernetes, through the module proxy) into the user's cache on first use.
#
# Usage: scripts/ensure-kube.sh
#
# Does nothing when etcd is installed. Otherwise, as root on Debian, installs etcd-server with
# apt-get (no recommended packages) and starts no service, as ensure-patroni.sh does: the
# install runs under a policy-rc.d that denies every start (apt-install.sh --no-start), and on a
# systemd host, where the package enables its unit, the unit is then disabled and stopped (the
# suite runs its own etcd on free ports; Debian's would listen unauthenticated on 2379). Fails
# with a non-zero exit, saying what to install, when etcd is missing and cannot be installed.
set -euo pipefail

die() { echo "ensure-kube: $*" >&2; exit 1; }

if command -v etcd >/dev/null; then
  exit 0
fi
if [[ ! -r /etc/debian_version ]]; then
  die "missing: etcd; install etcd 3.4 or later with your system's packages"
fi
"$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" --no-start etcd-server
state=$(systemctl is-system-running 2>/dev/null || true)
if [[ -n $state && $state != offline ]] && systemctl cat etcd.service >/dev/null 2>&1; then
  systemctl disable --now etcd.service >/dev/null 2>&1 ||
    echo "ensure-kube: could not disable and stop etcd.service; check: systemctl status etcd.service" >&2
fi
command -v etcd >/dev/null || die "apt-get ran but etcd is still missing"
echo "ensure-kube: $(etcd --version 2>/dev/null | head -1)" >&2
