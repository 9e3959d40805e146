#!/usr/bin/env bash
# docker-engine.sh — a Docker engine for the container tests, started by the project itself.
#
# Usage: scripts/docker-engine.sh start|stop|env|status
#
#   start   When an engine already answers (DOCKER_HOST, or the default socket), use it and
#           start nothing. Otherwise, as root, install Debian's docker.io if dockerd is
#           missing and start a PRIVATE dockerd: its own data root, exec root, socket and
#           PID file under $TERDUT_DOCKER_DIR (default /tmp/terdut-docker), never on
#           /var/run/docker.sock, so that nothing else on the machine sees it. Waits until it
#           answers, then prints the variables to export (as `env` does).
#   stop    Stops the private engine, if this script started one: dockerd by its PID (it stops
#           its containers and its containerd), then any process still running from the
#           state directory, then unmounts what is left under it. Leaves nothing running.
#   env     Prints `export DOCKER_HOST=...` and `export TESTCONTAINERS_HOST_OVERRIDE=...`
#           for the engine in use; eval it. Fails when no engine answers.
#   status  Exits 0 when an engine answers.
#
# TESTCONTAINERS_HOST_OVERRIDE is always printed: an engine on a unix socket publishes its
# ports on this machine's loopback, and without it testcontainers-go, seeing /.dockerenv,
# would guess a gateway address outside this machine.
set -euo pipefail

dir=${TERDUT_DOCKER_DIR:-/tmp/terdut-docker}
sock=$dir/docker.sock
pidfile=$dir/dockerd.pid
private_host=unix://$sock

die() { echo "docker-engine: $*" >&2; exit 1; }
say() { echo "docker-engine: $*" >&2; }

# answers HOST: the engine at HOST (empty: the client's default) answers within 5 s.
answers() {
  if [[ -n $1 ]]; then
    DOCKER_HOST=$1 timeout 5 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
  else
    (unset DOCKER_HOST; timeout 5 docker version --format '{{.Server.Version}}' >/dev/null 2>&1)
  fi
}

# host_in_use: the DOCKER_HOST of an engine that answers, preferring the caller's, then
# the default one, then ours. Fails when none answers.
host_in_use() {
  command -v docker >/dev/null || return 1
  if [[ -n ${DOCKER_HOST:-} ]]; then
    answers "$DOCKER_HOST" && { echo "$DOCKER_HOST"; return; }
    return 1
  fi
  if answers ""; then echo ""; return; fi
  if [[ -S $sock ]] && answers "$private_host"; then echo "$private_host"; return; fi
  return 1
}

# override HOST: the address under which the engine at HOST publishes ports to this machine.
override() {
  case $1 in
    "" | unix://* | npipe://*) echo 127.0.0.1 ;;
    tcp://127.* | tcp://localhost:* | tcp://\[::1\]:*) echo 127.0.0.1 ;;
    tcp://*) local h=${1#tcp://}; echo "${h%:*}" ;;
    *) echo 127.0.0.1 ;;
  esac
}

print_env() {
  local host=$1
  if [[ -n $host ]]; then
    echo "export DOCKER_HOST=$host"
  else
    echo "export DOCKER_HOST=unix:///var/run/docker.sock"
  fi
  echo "export TESTCONTAINERS_HOST_OVERRIDE=$(override "$host")"
}

install_engine() {
  command -v dockerd >/dev/null && return
  [[ $(id -u) == 0 ]] || die "no Docker engine answers and dockerd is missing; as root: apt-get install docker.io"
  [[ -r /etc/debian_version ]] || die "no Docker engine answers; install Docker for this system and start it"
  say "installing Debian's docker.io"
  local log
  log=$(mktemp)
  if ! { apt-get update -q -o DPkg::Lock::Timeout=300 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 \
      --no-install-recommends docker.io; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    die "apt-get could not install docker.io (output above)"
  fi
  rm -f "$log"
}

start() {
  local host
  if host=$(host_in_use); then
    say "an engine answers at ${host:-the default socket}; using it"
    print_env "$host"
    return
  fi
  [[ -z ${DOCKER_HOST:-} ]] || die "DOCKER_HOST=$DOCKER_HOST does not answer; unset it to let this script start an engine"
  [[ $(id -u) == 0 ]] || die "no Docker engine answers; start one (dockerd needs root), or run this script as root"
  install_engine
  mkdir -p "$dir/data" "$dir/exec"
  SECONDS=0
  # The dockerd here keeps its own everything; the default bridge it makes (docker0) is
  # the only thing it shares with the machine. Its proxy is a closed port on loopback, so
  # that a pull (of an image that no test should ask for) fails at once and sends nothing
  # beyond this machine, not even a name lookup.
  HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 NO_PROXY= \
    nohup dockerd --data-root "$dir/data" --exec-root "$dir/exec" -H "$private_host" \
    --pidfile "$pidfile" >"$dir/dockerd.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/started.pid"
  for _ in $(seq 1 120); do
    if answers "$private_host"; then
      say "started dockerd $(dockerd --version | awk '{print $3}' | tr -d ,) (pid $pid) in ${SECONDS}s; state in $dir, log $dir/dockerd.log"
      print_env "$private_host"
      return
    fi
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$dir/dockerd.log" >&2; die "dockerd exited (log above)"; }
    sleep 0.5
  done
  tail -n 20 "$dir/dockerd.log" >&2
  die "dockerd did not answer on $sock within 60s (log above)"
}

# pids_under: PIDs of processes whose command line names the state directory.
pids_under() {
  local p
  for p in /proc/[0-9]*; do
    { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$dir/" && echo "${p#/proc/}"
  done
  return 0
}

stop() {
  [[ -f $dir/started.pid ]] || { say "no engine started by this script in $dir"; return; }
  local pid
  pid=$(cat "$dir/started.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && { say "dockerd $pid ignored TERM for 30s; killing it"; kill -KILL "$pid"; }
  fi
  # containerd and its shims name the state directory in their arguments.
  local left
  left=$(pids_under)
  if [[ -n $left ]]; then
    say "stopping what dockerd left running: $(echo $left)"
    kill -TERM $left 2>/dev/null || true
    sleep 2
    left=$(pids_under)
    [[ -z $left ]] || kill -KILL $left 2>/dev/null || true
  fi
  { grep -F " $dir/" /proc/mounts || true; } | awk '{print $2}' | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -f "$dir/started.pid" "$sock"
  say "stopped the engine in $dir"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  env) host=$(host_in_use) || die "no Docker engine answers; run scripts/docker-engine.sh start"; print_env "$host" ;;
  status) host_in_use >/dev/null ;;
  *) die "usage: scripts/docker-engine.sh start|stop|env|status" ;;
esac
