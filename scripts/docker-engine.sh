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
#           its containers and its containerd), then what it left running of its session (start
#           puts dockerd in a session of its own: its containerd and shims stay in it; stop
#           records the session's processes while dockerd, checked to be the one started, leads
#           it, and signals only those), then unmounts what is left under it. A process that
#           merely names the state directory (a person's tail -f of the log) is not signalled.
#
# The state directory is made by this script, atomically (mkdir fails on anything already
# there, a symlink included), mode 700, with a marker inside; start and stop use it only when
# it is still a directory, not a symlink, owned by the caller, mode 700 and marked, and refuse
# any other (another user's, planted in the shared /tmp, or one made by hand), so that root
# never writes, nor finds its engine's socket, through a path another user controls. The PID
# file holds dockerd's PID, boot id and start time: stop signals that process only, never a
# PID that a stale file names after the engine died and its number went to another process
# (nor -1, "every process").
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
marker=$dir/.made-by-docker-engine.sh
private_host=unix://$sock

die() { echo "docker-engine: $*" >&2; exit 1; }
say() { echo "docker-engine: $*" >&2; }

# ours: the state directory is one this script made for this user: a directory, not a
# symlink, owned by us, mode 700, holding the marker (only we can write into it).
ours() {
  [[ -d $dir && ! -L $dir ]] || return 1
  [[ $(stat -c '%u %a' -- "$dir") == "$(id -u) 700" ]] || return 1
  [[ -f $marker && ! -L $marker ]]
}

# make_dir: make the state directory, or check that the one there is ours; die otherwise.
make_dir() {
  if (umask 077 && mkdir -- "$dir" 2>/dev/null); then
    chmod 700 -- "$dir"
    : >"$marker"
  fi
  ours || die "refusing $dir: not a directory this script made (it must be a directory, not a symlink, owned by $(id -un), mode 700, marked); another user may have planted it. Remove it, or set TERDUT_DOCKER_DIR to a path of your own"
}

# proc_start PID: the process's start time since boot (field 22 of /proc/PID/stat), or fail.
proc_start() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) } # the fields after the command name, which may hold spaces and parentheses
  set -- $stat
  echo "${20}"
}

boot_id() { cat /proc/sys/kernel/random/boot_id; }

# record PID: the line of started.pid for the process PID: its PID, boot id and start time.
record() {
  local start
  start=$(proc_start "$1") || return 1
  echo "$1 $(boot_id) $start"
}

# started_pid: the PID of the dockerd that started.pid records, if that very process still
# runs (same boot, same PID, same start time); fails otherwise, and for anything but a PID.
started_pid() {
  local pid boot start
  read -r pid boot start <"$dir/started.pid" || true
  [[ $pid =~ ^[1-9][0-9]*$ && $pid -gt 1 && -n $boot && -n $start ]] || return 1
  [[ $boot == "$(boot_id)" && $(proc_start "$pid") == "$start" ]] || return 1
  echo "$pid"
}

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
  # Only ours: a socket in a directory another user planted would be their engine.
  if ours && [[ -S $sock ]] && answers "$private_host"; then echo "$private_host"; return; fi
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
  make_dir
  mkdir -p "$dir/data" "$dir/exec"
  SECONDS=0
  # The dockerd here keeps its own everything; the default bridge it makes (docker0) is
  # the only thing it shares with the machine. Its proxy is a closed port on loopback, so
  # that a pull (of an image that no test should ask for) fails at once and sends nothing
  # beyond this machine, not even a name lookup.
  HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 NO_PROXY= \
    nohup setsid dockerd --data-root "$dir/data" --exec-root "$dir/exec" -H "$private_host" \
    --pidfile "$pidfile" >"$dir/dockerd.log" 2>&1 </dev/null &
  local pid=$!
  record "$pid" >"$dir/started.pid" || die "dockerd exited at once; log: $dir/dockerd.log"
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

# session_of SID: "PID START" for each process of the session SID (field 6 of /proc/PID/stat),
# with its start time, so that a number that later goes to another process is told apart.
session_of() {
  local sid=$1 p stat
  for p in /proc/[0-9]*; do
    stat=$(cat "$p/stat" 2>/dev/null) || continue
    stat=${stat##*) }
    set -- $stat
    [[ $4 == "$sid" ]] && echo "${p#/proc/} ${20}"
  done
  return 0
}

# still_running "PID START"...: the PIDs of those recorded processes that still run.
still_running() {
  local pid start
  while read -r pid start; do
    [[ -n $pid && $(proc_start "$pid") == "$start" ]] && echo "$pid"
  done <<<"$1"
  return 0
}

# pids_under: PIDs of processes whose command line names the state directory (for a person
# to look at; never signalled).
pids_under() {
  local p
  for p in /proc/[0-9]*; do
    { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$dir/" && echo "${p#/proc/}"
  done
  return 0
}

stop() {
  [[ -e $dir || -L $dir ]] || { say "no engine started by this script in $dir"; return; }
  ours || die "refusing $dir: not a directory this script made; signalling nothing"
  [[ -f $dir/started.pid ]] || { say "no engine started by this script in $dir"; return; }
  local pid session=
  if pid=$(started_pid); then
    session=$(session_of "$pid") # recorded while the dockerd started leads it
    kill -TERM "$pid"
    for _ in $(seq 1 60); do started_pid >/dev/null || break; sleep 0.5; done
    if pid=$(started_pid); then say "dockerd $pid ignored TERM for 30s; killing it"; kill -KILL "$pid"; fi
  else
    say "the dockerd that $dir/started.pid names is gone (or the file is not this script's): signalling no PID from it"
  fi
  # containerd and its shims stay in dockerd's session: those recorded, and no other process.
  local left
  left=$(still_running "$session")
  if [[ -n $left ]]; then
    say "stopping what dockerd left running: $(echo $left)"
    kill -TERM $left 2>/dev/null || true
    for _ in $(seq 1 20); do [[ -n $(still_running "$session") ]] || break; sleep 0.1; done
    left=$(still_running "$session")
    [[ -z $left ]] || kill -KILL $left 2>/dev/null || true
  fi
  left=$(pids_under)
  [[ -z $left ]] || say "processes still naming $dir, not the engine's as recorded, left alone: $(echo $left)"
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
