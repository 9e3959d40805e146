#!/usr/bin/env bash
# devdb.sh — a persistent local PostgreSQL for `make run`.
#
# Usage: scripts/devdb.sh start|stop|url
#
#   start  initialize .dev/pgdata if needed, start the server in the background
#          on 127.0.0.1:$TERDUT_DEV_PG_PORT (default 54329) and create database
#          `terdut` if missing. Does nothing if it is already running.
#   stop   fast shutdown of that server, if running.
#   url    print the database URL, e.g.
#          postgres://postgres@127.0.0.1:54329/terdut?sslmode=disable
#
# Uses the PostgreSQL server binaries on PATH or the newest ones in
# /usr/lib/postgresql/*/bin (Debian's postgresql package). Trust auth on
# loopback only: a development database, not for real data. As root, the
# server runs as the system user postgres, which owns .dev/pgdata.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
port=${TERDUT_DEV_PG_PORT:-54329}
data=$repo/.dev/pgdata
run=$repo/.dev/run # unix socket and server log
dbname=terdut
url="postgres://postgres@127.0.0.1:$port/$dbname?sslmode=disable"

die() { echo "devdb: $*" >&2; exit 1; }

# bin NAME: path of a PostgreSQL binary.
bin() {
  local p
  if p=$(command -v "$1"); then echo "$p"; return; fi
  p=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [[ -n $p && -x $p/$1 ]] || die "$1 not found on PATH or in /usr/lib/postgresql/*/bin; install the PostgreSQL server (e.g. apt-get install postgresql)"
  echo "$p/$1"
}

# as_server CMD...: run CMD as the user that owns the cluster.
as_server() {
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# prepare: create the directories and, as root, hand them to postgres.
prepare() {
  mkdir -p "$data" "$run"
  chmod 700 "$data"
  if [[ $(id -u) == 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root needs the system user postgres (it comes with Debian's postgresql package)"
    chown -R postgres:postgres "$data" "$run"
    local d=$repo/.dev
    while [[ $d != / ]]; do # let postgres reach .dev/ through the parents
      runuser -u postgres -- test -x "$d" || chmod o+x "$d"
      d=$(dirname "$d")
    done
  fi
}

running() {
  as_server "$(bin pg_ctl)" status -D "$data" >/dev/null 2>&1
}

start() {
  if [[ ! -f $data/PG_VERSION ]]; then
    prepare
    as_server "$(bin initdb)" -D "$data" --auth=trust --username=postgres -E UTF8 --no-locale >"$run/initdb.log" 2>&1 \
      || { cat "$run/initdb.log" >&2; die "initdb failed"; }
  fi
  if ! running; then
    prepare
    as_server "$(bin pg_ctl)" start -D "$data" -w -t 60 -l "$run/postgres.log" \
      -o "-p $port -k '$run' -c listen_addresses=127.0.0.1" >/dev/null \
      || { tail -n 20 "$run/postgres.log" >&2; die "server did not start; log: $run/postgres.log"; }
  fi
  local psql=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres)
  command -v psql >/dev/null || psql[0]=$(bin psql)
  if [[ -z $("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '$dbname'") ]]; then
    "${psql[@]}" -c "CREATE DATABASE $dbname" >/dev/null
  fi
}

stop() {
  [[ -f $data/PG_VERSION ]] || return 0
  if running; then
    as_server "$(bin pg_ctl)" stop -D "$data" -m fast -w >/dev/null
  fi
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  url) echo "$url" ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
