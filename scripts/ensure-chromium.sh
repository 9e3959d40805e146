#!/usr/bin/env bash
# ensure-chromium.sh — make sure headless Chromium is there for the browser tests
# (test/browsertest/, `make e2e`).
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
"$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" chromium
[[ -x $browser ]] || die "apt-get installed chromium but $browser is still missing"
"$browser" --headless --no-sandbox --version >/dev/null 2>&1 ||
  die "$browser is installed but does not run: try '$browser --headless --no-sandbox --version'"
echo "ensure-chromium: $("$browser" --version 2>/dev/null)" >&2
