#!/bin/sh
# docker-entrypoint.sh of terdut-test/postgres:15, the PostgreSQL image the tests build from
# Debian's packages (scripts/postgres-image.sh). It keeps the interface of the official
# postgres image, so that the same settings and the same wait strategy fit both:
#
#   POSTGRES_PASSWORD  the superuser's password (required unless POSTGRES_HOST_AUTH_METHOD=trust)
#   POSTGRES_USER      the superuser (default postgres)
#   POSTGRES_DB        a database created on first start (default: $POSTGRES_USER)
#   POSTGRES_HOST_AUTH_METHOD  pg_hba method for network clients (default scram-sha-256)
#   POSTGRES_INITDB_ARGS       extra initdb arguments
#   PGDATA             the cluster's directory (default /var/lib/postgresql/data)
#   /docker-entrypoint-initdb.d/*.sh, *.sql  run once, on first start
#
#   docker run IMAGE postgres -c key=value ...   (or just: docker run IMAGE -c key=value)
#
# On first start the cluster is made by initdb, then a temporary server that listens on no
# TCP port creates the database and runs the init scripts, and stops; then the real server
# starts. Each server logs "database system is ready to accept connections", so that line
# appears twice on a first start, as it does with the official image. The server never
# runs as root.
set -eu

: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA

if [ "${1#-}" != "$1" ]; then
	set -- postgres "$@"
fi
if [ "$1" != postgres ]; then
	exec "$@"
fi

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	chmod 2775 /var/run/postgresql
	chown -R postgres:postgres "$PGDATA" /var/run/postgresql
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	user=${POSTGRES_USER:-postgres}
	db=${POSTGRES_DB:-$user}
	method=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$method" != trust ]; then
		echo "docker-entrypoint: POSTGRES_PASSWORD is not set; set it, or POSTGRES_HOST_AUTH_METHOD=trust for a server anyone may use" >&2
		exit 1
	fi
	pwfile=$(mktemp)
	printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of arguments
	initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host="$method" \
		--encoding=UTF8 --locale=C.UTF-8 ${POSTGRES_INITDB_ARGS:-} >/dev/null
	rm -f "$pwfile"
	{
		echo
		echo "# Network clients sign in with a password (docker-entrypoint.sh)."
		echo "host all all all $method"
	} >>"$PGDATA/pg_hba.conf"
	echo "listen_addresses = '*'" >>"$PGDATA/postgresql.auto.conf"

	# The temporary server: unix socket only, so that nobody connects before init is done.
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w start
	if [ "$db" != postgres ]; then
		psql -v ON_ERROR_STOP=1 -q -U "$user" -d postgres -c "CREATE DATABASE \"$db\"" >/dev/null
	fi
	for f in /docker-entrypoint-initdb.d/*; do
		case $f in
			*.sh) echo "docker-entrypoint: running $f"; . "$f" ;;
			*.sql) echo "docker-entrypoint: running $f"; psql -v ON_ERROR_STOP=1 -q -U "$user" -d "$db" -f "$f" ;;
			*) ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop
	echo "docker-entrypoint: PostgreSQL init done; starting the server"
fi

exec "$@"
