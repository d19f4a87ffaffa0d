#!/usr/bin/env bash
# PostgreSQL servers for the fault suite (tests/fault), on 127.0.0.1 (and
# PGJOBD_CLUSTER_ADDR, below) only.
#
#   cluster.sh single DIR [-c NAME=VALUE ...]   one server (node n1)
#   cluster.sh pair DIR                         primary n1 + streaming standby
#                                               n2, synchronous replication
#   cluster.sh restart DIR [NODE]               pg_ctl restart -m immediate
#   cluster.sh crash DIR NODE                   pg_ctl stop -m immediate
#   cluster.sh promote DIR NODE                 pg_ctl promote, wait for it
#   cluster.sh rebuild DIR NODE FROM            NODE becomes a synchronous
#                                               standby of FROM again
#   cluster.sh stop DIR                         stop every node, remove all
#
# DIR gets: conninfo (every node, target_session_attrs=read-write), for each
# node NODE.port, NODE.data and NODE.log, plus bindir, user and base: the
# folder under /tmp that holds the data directories, sockets and server logs
# (the server user must reach them, whatever DIR's parents allow).
#
# Commits are durable against a crash of the server (synchronous_commit=on;
# fsync=off only matters if the machine itself goes down), so that a kill of
# PostgreSQL loses no acknowledged commit.  In a pair, the primary has
# synchronous_standby_names='*' on its command line only, so a promoted
# standby never waits for a standby of its own.
#
# initdb refuses root: as root the servers run as "postgres" (or "nobody").
#
# PGJOBD_CLUSTER_ADDR=A at "single" or "pair" makes the servers listen on
# address A as well as 127.0.0.1, and the conninfo name A; with
# PGJOBD_CLUSTER_CLIENTS=CIDR, pg_hba.conf trusts that network too (for
# replication as well).  tests/fault/netns.sh runs the servers in a network
# namespace of their own that way; both are kept in DIR for later commands.
set -euo pipefail
# shellcheck source=scripts/testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/testlib.sh"

# The servers must not inherit the caller's descriptors (a pipe that a test
# reads to EOF, for one): close everything above stderr.
for fd in /proc/$$/fd/*; do
	fd=${fd##*/}
	[ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-" 2>/dev/null
done
true

cmd=${1:?usage: cluster.sh single|pair|restart|crash|promote|rebuild|stop DIR ...}
dir=${2:?usage: cluster.sh CMD DIR ...}
shift 2

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
	echo "cluster: no initdb found (install postgresql-15)" >&2
	exit 1
}

run_user=postgres
[ -f "$dir/user" ] && run_user=$(cat "$dir/user")
addr=
[ -f "$dir/addr" ] && addr=$(cat "$dir/addr")

bindir() { cat "$dir/bindir"; }

# Server options of every node; the port is added per node.
common_opts() {
	echo "-c listen_addresses=127.0.0.1${addr:+,$addr} -c max_connections=200" \
		"-c fsync=off -c full_page_writes=on -c synchronous_commit=on" \
		"-c shared_buffers=128MB -c wal_level=replica -c max_wal_senders=10" \
		"-c hot_standby=on -c wal_keep_size=256MB -c log_min_messages=warning" \
		"-c log_line_prefix=%m_[%p]_%a_ -c unix_socket_directories=$1"
}

# start_node NODE EXTRA...: starts NODE (data already there) on its port.
start_node() {
	local node=$1
	shift
	local data port
	data=$(cat "$dir/$node.data")
	port=$(cat "$dir/$node.port")
	as_server "$(bindir)/pg_ctl" -D "$data" -l "$data.log" -w -t 120 \
		-o "-p $port $(common_opts "$data.sock") $*" start >"$dir/$node.pg_ctl" 2>&1 ||
		{ cat "$dir/$node.pg_ctl" "$data.log" >&2; return 1; }
}

# new_datadir NODE: an empty data directory; a node keeps its port.
new_datadir() {
	local node=$1 data
	data="$(cat "$dir/base")/$node"
	rm -rf "$data" "$data.sock"
	mkdir -p "$data" "$data.sock"
	[ "$(id -u)" -eq 0 ] && chown -R "$run_user" "$data" "$data.sock"
	chmod 700 "$data"
	echo "$data" >"$dir/$node.data"
	ln -sfn "$data.log" "$dir/$node.log"
	[ -f "$dir/$node.port" ] || free_port cluster >"$dir/$node.port"
}

prepare() {
	rm -rf "$dir"
	mkdir -p "$dir"
	run_user=postgres
	id -u postgres >/dev/null 2>&1 || run_user=nobody
	echo "$run_user" >"$dir/user"
	find_bindir >"$dir/bindir"
	local base
	base=$(mktemp -d /tmp/pgjobd-fault.XXXXXX)
	chmod 755 "$base"
	[ "$(id -u)" -eq 0 ] && chown "$run_user" "$base"
	echo "$base" >"$dir/base"
	addr=${PGJOBD_CLUSTER_ADDR:-}
	echo "$addr" >"$dir/addr"
	echo "${PGJOBD_CLUSTER_CLIENTS:-}" >"$dir/clients"
	return 0
}

initdb_node() {
	local node=$1
	new_datadir "$node"
	as_server "$(bindir)/initdb" -D "$(cat "$dir/$node.data")" -U postgres \
		--auth=trust -E UTF8 --no-sync >"$dir/$node.initdb" 2>&1 ||
		{ cat "$dir/$node.initdb" >&2; exit 1; }
	local clients
	clients=$(cat "$dir/clients")
	[ -z "$clients" ] ||
		printf 'host all all %s trust\nhost replication all %s trust\n' \
			"$clients" "$clients" >>"$(cat "$dir/$node.data")/pg_hba.conf"
}

psql_node() {
	local node=$1
	shift
	"$(bindir)/psql" -X -q -At -h 127.0.0.1 -p "$(cat "$dir/$node.port")" \
		-U postgres -d postgres "$@"
}

write_conninfo() {
	local hosts="" ports="" n
	for n in "$@"; do
		hosts="${hosts:+$hosts,}${addr:-127.0.0.1}"
		ports="${ports:+$ports,}$(cat "$dir/$n.port")"
	done
	printf 'host=%s port=%s user=postgres dbname=postgres target_session_attrs=read-write connect_timeout=2\n' \
		"$hosts" "$ports" >"$dir/conninfo"
}

# standby_of NODE FROM: base backup of FROM into a new NODE, started.
standby_of() {
	local node=$1 from=$2
	new_datadir "$node"
	as_server "$(bindir)/pg_basebackup" -h 127.0.0.1 -p "$(cat "$dir/$from.port")" \
		-U postgres -D "$(cat "$dir/$node.data")" -R -X stream --no-sync \
		-c fast >"$dir/$node.basebackup" 2>&1 ||
		{ cat "$dir/$node.basebackup" >&2; exit 1; }
	start_node "$node"
}

wait_sync() {
	local from=$1
	for _ in $(seq 1 600); do
		[ "$(psql_node "$from" -c "select count(*) from pg_stat_replication where sync_state = 'sync'" 2>/dev/null)" = 1 ] && return 0
		sleep 0.1
	done
	echo "cluster: no synchronous standby on $from" >&2
	exit 1
}

case "$cmd" in
single)
	prepare
	initdb_node n1
	for attempt in 1 2 3; do
		start_node n1 "$@" && break
		[ "$attempt" -eq 3 ] && exit 1
		free_port cluster >"$dir/n1.port"
	done
	write_conninfo n1
	echo "cluster: n1 on 127.0.0.1:$(cat "$dir/n1.port")"
	;;
pair)
	prepare
	initdb_node n1
	start_node n1 "-c synchronous_standby_names=*"
	standby_of n2 n1
	wait_sync n1
	write_conninfo n1 n2
	echo "cluster: primary n1 on ${addr:-127.0.0.1}:$(cat "$dir/n1.port"), synchronous standby n2 on ${addr:-127.0.0.1}:$(cat "$dir/n2.port")"
	;;
restart)
	node=${1:-n1}
	as_server "$(bindir)/pg_ctl" -D "$(cat "$dir/$node.data")" -m immediate -w -t 120 \
		restart >"$dir/$node.pg_ctl" 2>&1 ||
		{ cat "$dir/$node.pg_ctl" >&2; exit 1; }
	;;
crash)
	node=${1:?node}
	as_server "$(bindir)/pg_ctl" -D "$(cat "$dir/$node.data")" -m immediate -w stop \
		>"$dir/$node.pg_ctl" 2>&1 || { cat "$dir/$node.pg_ctl" >&2; exit 1; }
	;;
promote)
	node=${1:?node}
	as_server "$(bindir)/pg_ctl" -D "$(cat "$dir/$node.data")" -w -t 120 promote \
		>"$dir/$node.pg_ctl" 2>&1 || { cat "$dir/$node.pg_ctl" >&2; exit 1; }
	;;
rebuild)
	node=${1:?node}
	from=${2:?from}
	as_server "$(bindir)/pg_ctl" -D "$(cat "$dir/$node.data")" -m immediate -w stop \
		>/dev/null 2>&1 || true
	standby_of "$node" "$from"
	psql_node "$from" -c "alter system set synchronous_standby_names = '*'" -c "select pg_reload_conf()" >/dev/null
	wait_sync "$from"
	;;
stop)
	for n in n1 n2; do
		[ -f "$dir/$n.data" ] || continue
		data=$(cat "$dir/$n.data")
		as_server "$(bindir)/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 ||
			{ [ -f "$data/postmaster.pid" ] && kill -KILL "$(head -1 "$data/postmaster.pid")"; } ||
			true
	done
	[ -f "$dir/base" ] && rm -rf "$(cat "$dir/base")"
	rm -rf "$dir"
	;;
*)
	echo "usage: cluster.sh single|pair|restart|crash|promote|rebuild|stop DIR ..." >&2
	exit 2
	;;
esac
