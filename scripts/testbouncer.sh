#!/usr/bin/env bash
# A throwaway PgBouncer in front of the throwaway PostgreSQL of testpg.sh.
#   testbouncer.sh start DIR PGDIR MODE [POOL_SIZE]
#                         start pgbouncer on 127.0.0.1 on a free port, in
#                         pool_mode MODE (session, transaction or statement),
#                         POOL_SIZE server connections per database and user
#                         (default 20), every database of the server behind
#                         it; writes DIR/conninfo (the same user and dbname
#                         as PGDIR/conninfo) and DIR/port
#   testbouncer.sh stop DIR
#                         stop it and remove DIR
# The test server trusts loopback connections (testpg.sh), so pgbouncer
# trusts its clients too: auth_type trust still wants the user in an
# auth_file.  PgBouncer refuses to run as root, so as root it runs as the
# user that runs the test server (DIR/user).
set -euo pipefail
# shellcheck source=scripts/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"

cmd=${1:?usage: testbouncer.sh start DIR PGDIR MODE [POOL_SIZE] | stop DIR}
dir=${2:?usage: testbouncer.sh start DIR PGDIR MODE [POOL_SIZE] | stop DIR}

find_pgbouncer() {
	local p
	for p in "$(command -v pgbouncer 2>/dev/null || true)" /usr/sbin/pgbouncer; do
		[ -n "$p" ] && [ -x "$p" ] && { echo "$p"; return; }
	done
	echo "testbouncer: no pgbouncer found (install pgbouncer)" >&2
	exit 1
}

start() {
	local pgdir=${3:?usage: testbouncer.sh start DIR PGDIR MODE [POOL_SIZE]}
	local mode=${4:?usage: testbouncer.sh start DIR PGDIR MODE [POOL_SIZE]}
	local size=${5:-20}
	case "$mode" in
	session | transaction | statement) ;;
	*) echo "testbouncer: pool mode \"$mode\": session, transaction or statement" >&2; exit 2 ;;
	esac
	local bin pgport port conf
	bin=$(find_pgbouncer)
	pgport=$(cat "$pgdir/port")
	run_user=$(cat "$pgdir/user")
	rm -rf "$dir"
	mkdir -p "$dir"
	# Its files live where the user it runs as can write, as testpg.sh's
	# data directory does when the build folder is closed to that user.
	local run="$dir/run"
	if [ "$(id -u)" -eq 0 ] && ! runuser -u "$run_user" -- test -x "$dir"; then
		run=$(mktemp -d /tmp/pgjobd-testbouncer.XXXXXX)
		echo "$run" >"$dir/tmprun"
	fi
	mkdir -p "$run"
	[ "$(id -u)" -eq 0 ] && chown "$run_user" "$run"
	printf '"postgres" ""\n' >"$run/users.txt"
	for attempt in 1 2 3; do
		port=$(free_port testbouncer)
		conf="$run/pgbouncer.ini"
		cat >"$conf" <<-EOF
			[databases]
			* = host=127.0.0.1 port=$pgport
			[pgbouncer]
			listen_addr = 127.0.0.1
			listen_port = $port
			unix_socket_dir =
			auth_type = trust
			auth_file = $run/users.txt
			admin_users = postgres
			pool_mode = $mode
			default_pool_size = $size
			max_client_conn = 500
			logfile = $run/pgbouncer.log
			pidfile = $run/pgbouncer.pid
		EOF
		if as_server "$bin" -d "$conf" >"$dir/start.log" 2>&1 &&
			wait_listening "$port" && alive "$run"; then
			break
		fi
		stop_running "$run"
		[ "$attempt" -eq 3 ] && { cat "$dir/start.log" "$run/pgbouncer.log" >&2; exit 1; }
	done
	sed "s/port=[0-9]*/port=$port/" "$pgdir/conninfo" >"$dir/conninfo"
	printf '%s\n' "$port" >"$dir/port"
	printf '%s\n' "$run" >"$dir/rundir"
	echo "testbouncer: pgbouncer ($mode pooling) on 127.0.0.1:$port in front of 127.0.0.1:$pgport"
}

# pgbouncer -d returns once it has forked; the port opens a moment later.
wait_listening() {
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# The port answers, but another program could have taken it first: the
# pgbouncer of the pid file must be running too.
alive() {
	[ -f "$1/pgbouncer.pid" ] && kill -0 "$(cat "$1/pgbouncer.pid")" 2>/dev/null
}

stop_running() {
	local pid
	[ -f "$1/pgbouncer.pid" ] || return 0
	pid=$(cat "$1/pgbouncer.pid")
	kill -INT "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

stop() {
	if [ ! -f "$dir/rundir" ]; then
		# A start that failed before the end: its files only, the
		# folder under /tmp too when it made one.
		[ -f "$dir/tmprun" ] && rm -rf "$(cat "$dir/tmprun")"
		rm -rf "$dir"
		return 0
	fi
	local run
	run=$(cat "$dir/rundir")
	stop_running "$run"
	[ -f "$dir/tmprun" ] && rm -rf "$(cat "$dir/tmprun")"
	rm -rf "$dir"
	echo "testbouncer: stopped and removed"
}

case "$cmd" in
start) start "$@" ;;
stop) stop ;;
*) echo "usage: testbouncer.sh start DIR PGDIR MODE [POOL_SIZE] | stop DIR" >&2; exit 2 ;;
esac
