#!/usr/bin/env bash
# devdb.sh — a persistent local PostgreSQL for `make run`.
#
# Usage: scripts/devdb.sh start|stop|url
#
#   start  initialize .dev/pgdata if needed, start the server in the background
#          on 127.0.0.1:$TERDUT_DEV_PG_PORT (default 54329) and create database
#          `terdut` if missing. Does nothing if it is already running.
#   stop   fast shutdown of that server, if running.
#   url    print the database URL with its password masked, for people and logs:
#          postgres://postgres:***@127.0.0.1:54329/terdut?sslmode=disable
#   url --password
#          print the URL itself, to be captured, never shown:
#          TERDUT_DATABASE_URL=$(scripts/devdb.sh url --password)
#
# Uses the PostgreSQL server binaries on PATH or the newest ones in
# /usr/lib/postgresql/*/bin (Debian's postgresql package). A development
# database, not for real data, but not open to every local user either: its
# superuser needs a password (scram-sha-256, over loopback TCP and the socket
# alike), made at initdb and kept in .dev/password (mode 600); a cluster of an
# earlier version, which trusted every local connection, gets one at its next
# start. As root, the server runs as the system user postgres, which owns
# .dev/pgdata. No permission outside .dev is changed: where postgres cannot reach
# .dev through the checkout's parents (a checkout under /root), the cluster lives
# instead in a directory of its own, made private to postgres, under /var/tmp
# ($TERDUT_DEV_PG_OUTSIDE) and named by the checkout, recorded in
# .dev/cluster-dir; the password stays in .dev. Root acts on nothing in a directory
# postgres owns (the cluster's, its run directory, the one outside .dev): a link that
# whoever runs as postgres puts there would take root's act anywhere. postgres makes,
# closes and reads those itself.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
port=${TERDUT_DEV_PG_PORT:-54329}
dbname=terdut
pwfile=$repo/.dev/password
record=$repo/.dev/cluster-dir # where the cluster lives when it is not in .dev
cluster=$repo/.dev
[[ -s $record ]] && cluster=$(cat "$record")
data=$cluster/pgdata
run=$cluster/run # unix socket and server log

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

# prepare: create the directories and, as root, hand them to postgres, which must reach
# them through the checkout's parents: those are not ours to open up, so behind a closed one
# the cluster moves to a directory of its own (see outside).
prepare() {
  mkdir -p "$repo/.dev"
  chmod 700 "$repo/.dev"
  if [[ $(id -u) == 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root needs the system user postgres (it comes with Debian's postgresql package)"
    if [[ $cluster == "$repo/.dev" ]] && ! runuser -u postgres -- test -x "$repo" 2>/dev/null; then
      outside
    fi
  fi
  if [[ $(id -u) != 0 ]]; then
    mkdir -p "$data" "$run"
    chmod 700 "$data" "$run"
    return
  fi
  if [[ $cluster == "$repo/.dev" ]]; then
    # .dev is root's, so postgres cannot put a link in it: root makes the cluster's two
    # directories there (mkdir fails on a link) and hands them over, once.
    local d
    for d in "$data" "$run"; do
      [[ ! -L $d ]] || die "$d is a link: remove it"
      [[ -d $d ]] || mkdir -m 700 "$d"
      [[ $(stat -c %U "$d") == postgres ]] || chown -R postgres:postgres "$d"
    done
    # postgres may pass through .dev, not write in it: root writes the password and the
    # cluster's place there, and must never write into a directory postgres owns.
    chgrp postgres "$repo/.dev" && chmod 710 "$repo/.dev"
  fi
  # In postgres's directories postgres acts: through a link it planted it reaches only what
  # it could anyway.
  as_server mkdir -p "$data" "$run"
  as_server chmod 700 "$data" "$run"
}

# outside: the cluster's directory when postgres cannot reach the checkout (as root under
# /root): made here and now (mkdir fails on anything already there, a link included), private
# to postgres, and recorded in .dev so that stop and url find it; one whose owner or mode is
# not that is refused.
outside() {
  local base=${TERDUT_DEV_PG_OUTSIDE:-/var/tmp} dir
  dir=$base/terdut-devdb-$(printf '%s' "$repo" | sha256sum | cut -c1-16)
  if ! mkdir -m 700 "$dir" 2>/dev/null; then
    [[ -d $dir && ! -L $dir && $(stat -c '%U %a' "$dir") == "postgres 700" ]] ||
      die "$dir exists and is not a private directory of postgres: remove it, or set TERDUT_DATABASE_URL"
  fi
  chown postgres:postgres "$dir"
  echo "$dir" >"$record"
  cluster=$dir data=$dir/pgdata run=$dir/run
  echo "devdb: the postgres user cannot reach $repo (a parent is closed to it, as /root is); the cluster lives in $dir" >&2
}

# password: the superuser's password, made once and kept in .dev/password (mode 600).
password() {
  if [[ ! -s $pwfile ]]; then
    (umask 077 && od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$pwfile.new" && mv -f "$pwfile.new" "$pwfile")
  fi
  cat "$pwfile"
}

# url [--password]: the database URL, its password masked unless --password is given.
url() {
  local pw='***'
  case ${1:-} in
    --password) pw=$(password) ;;
    '') ;;
    *) die "url: unknown option $1 (url --password prints the URL with its password)" ;;
  esac
  echo "postgres://postgres:$pw@127.0.0.1:$port/$dbname?sslmode=disable"
}

# secure: a cluster made by an earlier version trusted every local connection as its
# superuser; give the superuser the password and ask for it from now on.
secure() {
  local hba=$data/pg_hba.conf
  as_server grep -Eq '^[^#]*[[:space:]]trust[[:space:]]*$' "$hba" || return 0
  "${psql[@]}" <<<"ALTER ROLE postgres PASSWORD '$(password)'" >/dev/null # on stdin: never in a command line
  as_server sed -i -E 's/^([^#]*[[:space:]])trust[[:space:]]*$/\1scram-sha-256/' "$hba"
  as_server "$(bin pg_ctl)" reload -D "$data" >/dev/null
}

running() {
  as_server "$(bin pg_ctl)" status -D "$data" >/dev/null 2>&1
}

start() {
  if [[ ! -f $data/PG_VERSION ]]; then
    prepare
    # initdb reads the password from a file of the server's user, gone once it is done; the
    # server's user writes it (root never writes into a directory postgres owns).
    password | as_server sh -c 'umask 077 && cat >"$1"' sh "$run/pwfile"
    as_server "$(bin initdb)" -D "$data" --auth=scram-sha-256 --pwfile="$run/pwfile" --username=postgres -E UTF8 --no-locale >"$repo/.dev/initdb.log" 2>&1 \
      || { as_server rm -f "$run/pwfile"; cat "$repo/.dev/initdb.log" >&2; die "initdb failed"; }
    as_server rm -f "$run/pwfile"
  fi
  if ! running; then
    prepare
    as_server "$(bin pg_ctl)" start -D "$data" -w -t 60 -l "$run/postgres.log" \
      -o "-p $port -k '$run' -c listen_addresses=127.0.0.1" >/dev/null \
      || { as_server tail -n 20 "$run/postgres.log" >&2 || true; die "server did not start; log: $run/postgres.log"; }
  fi
  # The password goes in psql's environment, never in a command line that every local user
  # can read in /proc.
  PGPASSWORD=$(password)
  export PGPASSWORD
  psql=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres)
  command -v psql >/dev/null || psql[0]=$(bin psql)
  secure
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
  url) url "${2:-}" ;;
  *) echo "usage: $0 start|stop|url [--password]" >&2; exit 2 ;;
esac
