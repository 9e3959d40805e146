#!/usr/bin/env bash
# ensure-node.sh — make sure the programs of the node suite (`make node`) are there: Debian's
# containerd and runc, the CNI plugins, iptables, ipset and conntrack, beside etcd
# (ensure-kube.sh). Kubernetes' own programs (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy) and kube-router are built from their Go modules by the
# suite itself into the user's cache on first use.
#
# Usage: scripts/ensure-node.sh
#
# Does nothing when every program is there. Otherwise, as root on Debian, installs the missing
# packages with apt-get (no recommended packages) and starts no service (apt-install.sh
# --no-start); on a systemd host, containerd's unit, which the package enables, is disabled and
# stopped (only when this run installed it): the suite runs its own containerd, with its own
# socket and state. Fails with a
# non-zero exit, saying what to install, when something is missing and cannot be installed.
set -euo pipefail

here=$(dirname "${BASH_SOURCE[0]}")
die() { echo "ensure-node: $*" >&2; exit 1; }

"$here/ensure-kube.sh"

declare -A package=([containerd]=containerd [runc]=runc [/usr/lib/cni/bridge]=containernetworking-plugins
  [iptables]=iptables [ipset]=ipset [conntrack]=conntrack [ip]=iproute2 [gcc]=gcc)
missing=()
for prog in "${!package[@]}"; do
  if [[ $prog == /* ]]; then [[ -x $prog ]] && continue; else command -v "$prog" >/dev/null && continue; fi
  missing+=("${package[$prog]}")
done
# The pause image is compiled statically: glibc's static library.
[[ -e /usr/lib/x86_64-linux-gnu/libc.a || -e /usr/lib/aarch64-linux-gnu/libc.a ]] || missing+=(libc6-dev)
((${#missing[@]})) || exit 0
[[ -r /etc/debian_version ]] || die "missing: ${missing[*]}; install them with your system's packages"
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
"$here/apt-install.sh" --no-start "${missing[@]}"
state=$(systemctl is-system-running 2>/dev/null || true)
# Only when this run installed containerd: a containerd already there (a Docker engine's) is left alone.
if [[ " ${missing[*]} " == *" containerd "* && -n $state && $state != offline ]] &&
  systemctl cat containerd.service >/dev/null 2>&1; then
  systemctl disable --now containerd.service >/dev/null 2>&1 ||
    echo "ensure-node: could not disable and stop containerd.service; check: systemctl status containerd.service" >&2
fi
for prog in containerd runc iptables ipset conntrack; do
  command -v "$prog" >/dev/null || die "apt-get ran but $prog is still missing"
done
[[ -x /usr/lib/cni/bridge ]] || die "apt-get ran but /usr/lib/cni/bridge is still missing"
echo "ensure-node: installed ${missing[*]}" >&2
