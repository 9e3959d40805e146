#!/usr/bin/env bash
# ensure-wrk.sh — make sure wrk, the HTTP load generator of the bench's API-key figure, is
# there (bench/, `make bench`).
#
# Usage: scripts/ensure-wrk.sh
#
# Does nothing when wrk is already on PATH. Otherwise, as root, installs Debian's `wrk`
# package with apt-get (quietly; apt's output is shown only if it fails). Fails loudly, with
# a non-zero exit, when wrk is missing and cannot be installed; the bench then falls back to
# its Go load generator and says so.
set -euo pipefail

die() { echo "ensure-wrk: $*" >&2; exit 1; }

if command -v wrk >/dev/null 2>&1; then
  exit 0
fi
"$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" wrk
command -v wrk >/dev/null 2>&1 || die "apt-get installed wrk but it is still not on PATH"
echo "ensure-wrk: $(wrk --version 2>&1 | head -n1)" >&2
