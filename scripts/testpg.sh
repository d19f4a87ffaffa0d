#!/usr/bin/env bash
# A throwaway PostgreSQL for tests and the demo.
#   testpg.sh start DIR   initdb into DIR/data, start on 127.0.0.1 on a free
#                         port with its socket in DIR/sock; writes DIR/conninfo
#   testpg.sh stop DIR    stop it and remove DIR
#   testpg.sh env DIR     print PG* exports for a shell
#   testpg.sh crash DIR   stop it at once (pg_ctl stop -m immediate), keeping
#                         DIR: an outage, for tests
#   testpg.sh resume DIR  start it again after crash, on the same port
# PGJOBD_TESTPG_DURABLE=1 keeps PostgreSQL's default durability (fsync and
# synchronous_commit on), for benchmarks; tests run without it.
# PGJOBD_TESTPG_OPTS adds server options, after ours so that they win
# (e.g. "-c shared_preload_libraries=pg_stat_statements" for the benchmark
# suite, or churn.sh --debug's logging).
# max_prepared_transactions is on (10) so that test_health can hold the
# xmin horizon with a prepared transaction.
# initdb refuses root, so as root the server runs as the user "postgres"
# (created by Debian's postgresql package) or "nobody" as a last resort.
set -euo pipefail
# shellcheck source=scripts/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"

cmd=${1:?usage: testpg.sh start|stop|env|crash|resume DIR}
dir=${2:?usage: testpg.sh start|stop|env|crash|resume DIR}

find_bindir() {
	local d
	if command -v pg_config >/dev/null 2>&1; then
		d=$(pg_config --bindir)
		[ -x "$d/initdb" ] && { echo "$d"; return; }
	fi
	for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && { echo "$d"; return; }
	done
	command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return; }
	echo "testpg: no initdb found (install postgresql-15)" >&2
	exit 1
}

start() {
	local bindir port data
	bindir=$(find_bindir)
	run_user=postgres
	id -u postgres >/dev/null 2>&1 || run_user=nobody
	rm -rf "$dir"
	mkdir -p "$dir"
	data="$dir/data"
	# The server user must reach the data directory: when a parent of the
	# build folder is closed to it, keep the cluster under /tmp instead.
	if [ "$(id -u)" -eq 0 ] && ! runuser -u "$run_user" -- test -x "$dir"; then
		data=$(mktemp -d /tmp/pgjobd-testpg.XXXXXX)
		echo "$data" >"$dir/tmpdata"
	fi
	mkdir -p "$data" "$data.sock"
	[ "$(id -u)" -eq 0 ] && chown -R "$run_user" "$data" "$data.sock"
	as_server "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 \
		--no-sync >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	local speed="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	[ "${PGJOBD_TESTPG_DURABLE:-0}" = 1 ] && speed=""
	speed="$speed ${PGJOBD_TESTPG_OPTS:-}"
	for attempt in 1 2 3; do
		port=$(free_port testpg)
		if as_server "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
			-o "-p $port -k $data.sock -c listen_addresses=127.0.0.1 \
			-c max_connections=300 -c max_prepared_transactions=10 \
			-c shared_buffers=256MB -c log_min_messages=warning \
			$speed" start >"$dir/pg_ctl.log" 2>&1; then
			break
		fi
		[ "$attempt" -eq 3 ] && { cat "$dir/pg_ctl.log" "$data/server.log" >&2; exit 1; }
	done
	printf 'host=127.0.0.1 port=%s user=postgres dbname=postgres\n' "$port" >"$dir/conninfo"
	printf '%s\n' "$port" >"$dir/port"
	printf '%s\n' "$bindir" >"$dir/bindir"
	printf '%s\n' "$run_user" >"$dir/user"
	printf '%s\n' "$data" >"$dir/datadir"
	echo "testpg: PostgreSQL running on 127.0.0.1:$port (data $data)"
}

stop() {
	if [ ! -f "$dir/datadir" ]; then
		# A start that failed before the end: its files only, the
		# data directory under /tmp too when it made one.
		[ -f "$dir/tmpdata" ] && rm -rf "$(cat "$dir/tmpdata")" "$(cat "$dir/tmpdata").sock"
		rm -rf "$dir"
		return 0
	fi
	local data bindir
	data=$(cat "$dir/datadir")
	bindir=$(cat "$dir/bindir")
	run_user=$(cat "$dir/user")
	as_server "$bindir/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
		as_server "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
	[ -f "$dir/tmpdata" ] && rm -rf "$(cat "$dir/tmpdata")" "$(cat "$dir/tmpdata").sock"
	rm -rf "$dir"
	echo "testpg: stopped and removed"
}

# crash and resume: an outage of the server and its end, for tests
# (test_multidb).  pg_ctl restart starts a stopped server with the options
# it last ran with (postmaster.opts): the same port and socket.
crash() {
	run_user=$(cat "$dir/user")
	as_server "$(cat "$dir/bindir")/pg_ctl" -D "$(cat "$dir/datadir")" \
		-m immediate -w stop >/dev/null
}

resume() {
	local data
	data=$(cat "$dir/datadir")
	run_user=$(cat "$dir/user")
	as_server "$(cat "$dir/bindir")/pg_ctl" -D "$data" -l "$data/server.log" \
		-w -t 60 restart >"$dir/pg_ctl.log" 2>&1 ||
		{ cat "$dir/pg_ctl.log" >&2; exit 1; }
}

case "$cmd" in
start) start ;;
stop) stop ;;
crash) crash ;;
resume) resume ;;
env)
	printf 'export PGHOST=127.0.0.1 PGPORT=%s PGUSER=postgres PGDATABASE=postgres\n' \
		"$(cat "$dir/port")"
	;;
*) echo "usage: testpg.sh start|stop|env|crash|resume DIR" >&2; exit 2 ;;
esac
