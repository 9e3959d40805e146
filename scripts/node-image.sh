#!/usr/bin/env bash
# node-image.sh — the server's image as an archive, for the node suite (`make node`), whose
# containerd imports it: no registry is involved.
#
# Usage: scripts/node-image.sh IMAGE ARCHIVE
#
# Builds IMAGE from the Dockerfile (scripts/server-image.sh, as `make image` does: seconds once
# its bases are made) on the engine that answers, or on a private one it starts and stops again
# (scripts/docker-engine.sh), so that the archive holds the code of this checkout, then writes
# `docker save IMAGE` to ARCHIVE.
set -euo pipefail

here=$(dirname "${BASH_SOURCE[0]}")
die() { echo "node-image: $*" >&2; exit 1; }
[[ $# -eq 2 ]] || die "usage: scripts/node-image.sh IMAGE ARCHIVE"
image=$1 archive=$2

if ! "$here/docker-engine.sh" status >/dev/null 2>&1; then
  trap '"$here/docker-engine.sh" stop >/dev/null 2>&1 || echo "node-image: could not stop the Docker engine" >&2' EXIT
fi
env=$("$here/docker-engine.sh" start) || die "no Docker engine: scripts/docker-engine.sh start failed (above)"
eval "$env"
"$here/server-image.sh" "$image"
docker save -o "$archive" "$image"
echo "node-image: $image saved to $archive" >&2
