#!/usr/bin/env bash
# ensure-chromium.sh — make sure headless Chromium is there for the browser tests
# (browsertest/, `make e2e`).
#
# Usage: scripts/ensure-chromium.sh
#
# Does nothing when the browser is already installed: $CHROMIUM if set, else
# /usr/bin/chromium. Otherwise, as root, installs Debian's `chromium` package
# with apt-get (quietly; apt's output is shown only if it fails). Fails loudly,
# with a non-zero exit, when the browser is missing and cannot be installed.
# Test tools cannot download a browser build of their own: the distribution's
# package is the only source.
set -euo pipefail

browser=${CHROMIUM:-/usr/bin/chromium}

die() { echo "ensure-chromium: $*" >&2; exit 1; }

if [[ -x $browser ]]; then
  exit 0
fi
if [[ -n ${CHROMIUM:-} ]]; then
  die "CHROMIUM=$CHROMIUM is not an executable file; unset it to use Debian's /usr/bin/chromium"
fi
if [[ $(id -u) -ne 0 ]]; then
  die "$browser is missing; install it as root: apt-get update && apt-get install -y chromium"
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "ensure-chromium: installing Debian's chromium package (this takes a minute)" >&2
if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; } >"$log" 2>&1; then
  cat "$log" >&2
  die "apt-get could not install chromium (output above)"
fi
[[ -x $browser ]] || die "apt-get installed chromium but $browser is still missing"
"$browser" --headless --no-sandbox --version >/dev/null 2>&1 ||
  die "$browser is installed but does not run: try '$browser --headless --no-sandbox --version'"
echo "ensure-chromium: $("$browser" --version 2>/dev/null)" >&2
