#!/usr/bin/env bash
# pgjobd under a real HA stack (docs/ha.md#patroni-etcd-and-haproxy): a
# three-member etcd, three PostgreSQL 15 servers run by Patroni in
# synchronous mode, HAProxy routing by Patroni's REST check, and two pgjobd
# instances, one on a multi-host conninfo, one through HAProxy; every host a
# Linux network namespace on one bridge (tests/fault/netlib.sh, as
# fault.netns builds them):
#
#   e1 e2 e3   10.233.0.11-13  etcd          ctl 10.233.0.5  patronictl, psql,
#   db1-db3    10.233.0.21-23  Patroni + PG                  the load, checks
#   lb         10.233.0.30     HAProxy :5000 web 10.233.0.50 the http receiver
#   a1 a2      10.233.0.41-42  pgjobd (a1 multi-host, a2 through HAProxy)
#
# Patroni's cluster-wide config, the pgjobd configs and haproxy.cfg are the
# blocks of docs/ha.md, read from it (host names replaced by addresses).
# A steady load runs all along (sql, exec, http, a workflow, a batch with a
# callback, a limited queue, a schedule) through the faults, in turn:
# switchover, failover, kill -9 of the primary's postmaster, the primary cut
# off the network, the primary cut off from etcd alone, the etcd leader
# killed, an etcd member cut off, the primary's host crashed while the
# asynchronous standby lags.  After each fault and at the end, the
# invariants of docs/ha.md; one figures line per fault and one for the run.
#
#   bash tests/ha/patroni.sh [--quick]
#
# --quick: switchover, kill -9 and the primary cut off only.  Root only;
# scripts/ha-deps.sh installs what it needs; build the tree first
# (PGJOBD_TEST_BIN names the build folder, ./build by default).  Not part
# of ctest.  PGJOBD_HA_KEEP=1 keeps the logs of a run that passed.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/fault/netlib.sh
. "$src/tests/fault/netlib.sh"
bin=${PGJOBD_TEST_BIN:-$src/build}
bin=$(cd "$bin" && pwd)
pgbin=/usr/lib/postgresql/15/bin

quick=0
case "${1:-}" in
--quick) quick=1 ;;
"") ;;
*) echo "usage: tests/ha/patroni.sh [--quick]" >&2; exit 2 ;;
esac

skip() {
	echo "ha: SKIPPED: $*" >&2
	exit 77
}
die() {
	echo "ha: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (ip netns); run as root"
for c in ip unshare runuser patroni patronictl etcd etcdctl haproxy tc jq python3; do
	command -v "$c" >/dev/null || die "no $c: run scripts/ha-deps.sh (and scripts/deps.sh)"
done
[ -x "$pgbin/initdb" ] || die "no PostgreSQL 15 in $pgbin: run scripts/deps.sh"
[ -x "$bin/pgjobd" ] && [ -x "$bin/pgjob" ] || die "no $bin/pgjobd: build the tree first"
id -u postgres >/dev/null 2>&1 || die "no user postgres (Debian's postgresql-15 makes it)"

tag=$(($$ % 10000))
declare -A NS ADDR
ADDR=([ctl]=10.233.0.5 [e1]=10.233.0.11 [e2]=10.233.0.12 [e3]=10.233.0.13
	[db1]=10.233.0.21 [db2]=10.233.0.22 [db3]=10.233.0.23 [lb]=10.233.0.30
	[a1]=10.233.0.41 [a2]=10.233.0.42 [web]=10.233.0.50)
for n in sw "${!ADDR[@]}"; do NS[$n]=pgha$tag$n; done
etcds=(e1 e2 e3)
dbs=(db1 db2 db3)
apps=(a1 a2)
lease_s=10

# Logs, configs and ledgers in dir; what the server user (postgres) must
# reach, whatever dir's parents allow, in base, on tmpfs so that etcd's and
# PostgreSQL's fsyncs cost the loaded machine little.
dir=$bin/tmp/ha-$$
base=/dev/shm/pgha-$$
declare -A PID
created=()
fails=0
begin=$(date +%s)

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	touch "$dir/stop" 2>/dev/null || true
	disown -a 2>/dev/null || true
	for p in "${PID[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	sleep 1
	netlib_teardown
	rm -rf "$base"
	if [ "$rc" -eq 77 ] || { [ "$rc" -eq 0 ] && [ -z "${PGJOBD_HA_KEEP:-}" ]; }; then
		rm -rf "$dir"
	else
		echo "ha: logs, configs and ledgers left in $dir" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

note() { echo "[ha $(date -u +%T)] $*" >&2; }
fail() {
	echo "HA INVARIANT: $*" >&2
	fails=$((fails + 1))
}
in_ns() {
	local n=$1
	shift
	ip netns exec "${NS[$n]}" "$@"
}
# bg_ns HOST COMMAND... &: the same in the background, the shell's $! the
# command's own pid (exec: no subshell in between to take the signals).
bg_ns() {
	local n=$1
	shift
	exec ip netns exec "${NS[$n]}" "$@"
}

# ---------------------------------------------------------------------
# The blocks of docs/ha.md.

doc=$src/docs/ha.md
# doc_block KEY: the fenced block after the first line of the Patroni
# section that contains KEY.
doc_block() {
	awk -v key="$1" '
		/^## Patroni, etcd and HAProxy/ { sec = 1 }
		sec && !found && index($0, key) { found = 1; next }
		found && /^```/ { if (inb) exit; inb = 1; next }
		inb { print }' "$doc"
}
# hosts: docs/ha.md's host names, as this run's addresses.
hosts() {
	sed -e "s/host=db1,db2,db3 /host=${ADDR[db1]},${ADDR[db2]},${ADDR[db3]} /" \
		-e "s/host=haproxy /host=${ADDR[lb]} /" \
		-e "s/ db1:5432/ ${ADDR[db1]}:5432/" -e "s/ db2:5432/ ${ADDR[db2]}:5432/" \
		-e "s/ db3:5432/ ${ADDR[db3]}:5432/"
}
doc_dcs=$(doc_block '`patroni.yml`:')
doc_multi=$(doc_block '`pgjobd.yaml`:' | hosts)
doc_proxy=$(doc_block '`pgjobd-haproxy.yaml` names' | hosts)
doc_haproxy=$(doc_block '`haproxy.cfg`:' | hosts)
grep -q 'synchronous_mode: true' <<<"$doc_dcs" || die "docs/ha.md: no Patroni block with synchronous_mode"
grep -q "host=${ADDR[db1]},${ADDR[db2]},${ADDR[db3]} .*target_session_attrs=read-write" <<<"$doc_multi" ||
	die "docs/ha.md: no multi-host pgjobd config"
grep -q "host=${ADDR[lb]} port=5000" <<<"$doc_proxy" || die "docs/ha.md: no pgjobd config through HAProxy"
grep -q "option httpchk GET /primary" <<<"$doc_haproxy" &&
	grep -q "${ADDR[db3]}:5432 check port 8008" <<<"$doc_haproxy" ||
	die "docs/ha.md: no haproxy.cfg with Patroni's check"

# ---------------------------------------------------------------------
# The network.

mkdir -p "$dir" "$base"
chown postgres: "$base"
netlib_switch "${NS[sw]}" || skip "cannot create a network namespace: $netlib_err"
for n in "${!ADDR[@]}"; do netlib_host "$n"; done
note "namespaces pgha$tag* on 10.233.0.0/24; docs/ha.md's blocks read"

# ---------------------------------------------------------------------
# etcd, Patroni, HAProxy.

icluster=$(for n in "${etcds[@]}"; do printf '%s=http://%s:2380,' "$n" "${ADDR[$n]}"; done)
icluster=${icluster%,}
etcd_eps=$(for n in "${etcds[@]}"; do printf 'http://%s:2379,' "${ADDR[$n]}"; done)
etcd_eps=${etcd_eps%,}
start_etcd() {
	local n=$1 a=${ADDR[$1]}
	# A loaded machine misses 100 ms heartbeats: etcd's defaults would
	# elect leaders all the time.
	bg_ns "$n" etcd --name "$n" --data-dir "$base/$n.etcd" \
		--listen-client-urls "http://$a:2379" --advertise-client-urls "http://$a:2379" \
		--listen-peer-urls "http://$a:2380" --initial-advertise-peer-urls "http://$a:2380" \
		--initial-cluster "$icluster" --initial-cluster-state new \
		--initial-cluster-token "pgha$tag" --heartbeat-interval 200 \
		--election-timeout 2000 --log-level warn \
		</dev/null >>"$dir/$n.log" 2>&1 &
	PID[$n]=$!
}
etcdctl_() { in_ns ctl env ETCDCTL_API=3 etcdctl --dial-timeout=2s --command-timeout=3s "$@"; }
# etcd_leader: the member that leads, from the members that answer.
etcd_leader() {
	local n st
	for n in "${etcds[@]}"; do
		st=$(etcdctl_ --endpoints="http://${ADDR[$n]}:2379" endpoint status -w json 2>/dev/null) || continue
		jq -e '.[0].Status.header.member_id == .[0].Status.leader' <<<"$st" >/dev/null &&
			{ echo "$n"; return 0; }
	done
	return 1
}
for n in "${etcds[@]}"; do start_etcd "$n"; done

cat >"$base/ctl.yml" <<EOF
scope: pgha
etcd3:
  hosts: $(echo "$etcd_eps" | sed 's#http://##g')
EOF
start_patroni() {
	bg_ns "$1" setpriv --reuid=postgres --regid=postgres --init-groups \
		patroni "$base/$1.yml" </dev/null >>"$dir/$1.log" 2>&1 &
	PID[$1]=$!
}
for n in "${dbs[@]}"; do
	a=${ADDR[$n]}
	mkdir -p "$base/$n.sock"
	chown postgres: "$base/$n.sock"
	{
		cat <<EOF
scope: pgha
name: $n
restapi:
  listen: $a:8008
  connect_address: $a:8008
etcd3:
  hosts: $(echo "$etcd_eps" | sed 's#http://##g')
postgresql:
  listen: $a:5432
  connect_address: $a:5432
  data_dir: $base/$n
  bin_dir: $pgbin
  pgpass: $base/$n.pgpass
  authentication:
    superuser: { username: postgres, password: pgha }
    replication: { username: replicator, password: pgha }
    rewind: { username: postgres, password: pgha }
  parameters:
    unix_socket_directories: $base/$n.sock
    shared_buffers: 32MB
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host all all 10.233.0.0/24 trust
    - host replication all 10.233.0.0/24 trust
watchdog: { mode: off }
EOF
		echo "$doc_dcs"
	} >"$base/$n.yml"
	chown postgres: "$base/$n.yml"
	start_patroni "$n"
done
echo "$doc_haproxy" >"$base/haproxy.cfg"
bg_ns lb haproxy -f "$base/haproxy.cfg" -db </dev/null >>"$dir/lb.log" 2>&1 &
PID[lb]=$!

pctl() { in_ns ctl timeout 60 patronictl -c "$base/ctl.yml" "$@"; }
# members: "name role state lag" per member, as patronictl lists them.
members() {
	pctl list -f json 2>/dev/null | jq -r '.[] | [.Member, (.Role | gsub(" "; "_")),
		.State, (."Lag in MB" // 0 | tostring)] | join(" ")'
}
leader() { members | awk '$2 == "Leader" && $3 == "running" { print $1 }'; }
sync_standby() { members | awk '$2 == "Sync_Standby" { print $1 }'; }

# healthy: one running leader, a synchronous standby, every member running
# (or streaming) and caught up.
healthy() {
	local m
	m=$(members) || return 1
	[ "$(awk '$2 == "Leader" && $3 == "running"' <<<"$m" | wc -l)" -eq 1 ] &&
		[ "$(awk '$2 == "Sync_Standby"' <<<"$m" | wc -l)" -eq 1 ] &&
		[ "$(awk '($3 == "running" || $3 == "streaming") && $4 == "0"' <<<"$m" | wc -l)" -eq 3 ]
}
wait_until() { # SECONDS WHAT COMMAND...
	local end=$(($(date +%s) + $1)) what=$2
	shift 2
	until "$@"; do
		[ "$(date +%s)" -lt "$end" ] || die "waited in vain for $what: $(members | tr '\n' ';')"
		sleep 1
	done
}
wait_until 240 "a healthy Patroni cluster" healthy
note "Patroni: $(members | tr '\n' ';')"

# ---------------------------------------------------------------------
# The database, through the multi-host conninfo from ctl.

ctl_ci="host=${ADDR[db1]},${ADDR[db2]},${ADDR[db3]} port=5432 user=postgres
	target_session_attrs=read-write connect_timeout=3 keepalives_idle=2
	keepalives_interval=1 keepalives_count=2 tcp_user_timeout=5000"
q() {
	PGOPTIONS="-c client_min_messages=warning" in_ns ctl timeout 30 \
		"$pgbin/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$ctl_ci dbname=${qdb:-app}" "$@"
}
# qr SQL: the same, tried again for up to 120 s (a failover in between).
qr() {
	local i out
	for i in $(seq 1 240); do
		out=$(q -c "$1" 2>/dev/null) && { echo "$out"; return 0; }
		sleep 0.5
	done
	die "no answer from the database for 120 s to: $1"
}
qdb=postgres qr "create role pgjobd login superuser" >/dev/null
qdb=postgres qr "create database app owner pgjobd" >/dev/null
# libpq tries no further host after a server that refuses the database:
# a standby that has not yet replayed its creation would stop the
# multi-host conninfo there, so the database must reach every member first.
has_app() {
	local n
	for n in "${dbs[@]}"; do
		[ "$(in_ns ctl "$pgbin/psql" -X -At -d "host=${ADDR[$n]} user=postgres dbname=postgres" \
			-c "select count(*) from pg_database where datname = 'app'" 2>/dev/null)" = 1 ] || return 1
	done
}
wait_until 60 "database app on every member" has_app
in_ns ctl "$bin/pgjob" --database "$ctl_ci dbname=app user=pgjobd" migrate >/dev/null
# No unique keys: a second run would be counted, not hidden.
q -c "create table ledger_sql (job_id bigint not null, token bigint not null,
	host text not null, at timestamptz not null)" \
	-c "create table ledger_cb (batch_id bigint not null, job_id bigint not null,
	token bigint not null)"

: >"$dir/ledger.http"
bg_ns web python3 "$src/tests/fault/netns_http.py" "${ADDR[web]}" 8080 "$dir/ledger.http" \
	</dev/null >"$dir/web.log" 2>&1 &
PID[web]=$!

# ---------------------------------------------------------------------
# pgjobd: docs/ha.md's configs, with this run's handlers.

for h in "${apps[@]}"; do
	: >"$dir/ledger.exec.$h"
	: >"$dir/ledger.lim.$h"
	if [ "$h" = a1 ]; then echo "$doc_multi"; else echo "$doc_proxy"; fi >"$dir/$h.yaml"
	cat >>"$dir/$h.yaml" <<EOF
workers: 2
poll_interval: 250ms
log: { level: info }
defaults: { timeout: 60s, max_attempts: 1000, backoff: { base: 100ms, max: 1s } }
queues:
  default: { concurrency: 4 }
  lim: { concurrency: 2, global_concurrency: 2, rate: 4/s, burst: 2 }
handlers:
  sqlj: { type: sql, statement: "insert into ledger_sql (job_id, token, host, at) select \$2, j.lease_token, split_part(j.locked_by, ':', 1), clock_timestamp() from pgjob.all_jobs j where j.id = \$2 and \$1 is not null" }
  tickj: { type: sql, statement: "insert into ledger_sql (job_id, token, host, at) select \$2, j.lease_token, split_part(j.locked_by, ':', 1), clock_timestamp() from pgjob.all_jobs j where j.id = \$2 and \$1 is not null" }
  cbj: { type: sql, statement: "insert into ledger_cb (batch_id, job_id, token) select (\$1::jsonb #>> '{pgjob,batch,id}')::bigint, \$2, j.lease_token from pgjob.all_jobs j where j.id = \$2" }
  execj: { type: exec, command: ["/bin/sh", "$src/tests/fault/ledger.sh", "$dir/ledger.exec.$h", "0.2"] }
  execslow: { type: exec, command: ["/bin/sh", "$src/tests/fault/ledger.sh", "$dir/ledger.exec.$h", "3"] }
  limj: { type: exec, queue: lim, command: ["/bin/sh", "$src/tests/fault/ledger.sh", "$dir/ledger.lim.$h", "0.3"] }
  httpj: { type: http, url: "http://${ADDR[web]}:8080/hook", timeout: 10s }
schedules:
  tick: { cron: "* * * * *", kind: tickj }
EOF
	in_ns "$h" "$bin/pgjobd" -c "$dir/$h.yaml" --check-config=static >/dev/null ||
		die "pgjobd refuses $dir/$h.yaml"
done
start_app() {
	local h=$1
	# Its own UTS namespace gives the instance its host's name (locked_by).
	bg_ns "$h" unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "$h" \
		"$bin/pgjobd" -c "$dir/$h.yaml" </dev/null >>"$dir/$h.log" 2>&1 &
	PID[$h]=$!
}
for h in "${apps[@]}"; do start_app "$h"; done
live_workers() {
	[ "$(qr "select count(*) from pgjob.workers where heartbeat_at > now() - interval '$lease_s seconds'")" -eq 4 ]
}
wait_until 120 "4 pgjobd workers" live_workers

# ---------------------------------------------------------------------
# The load: a round a second, each one transaction (whole or absent).

# A round: 2 sql, 1 exec, 1 http, 2 limited, every 4th a slow exec (3 s, to
# be running through a fault); a workflow a -> (b, c) -> d; a batch of 3
# sql jobs whose callback is cbj.
per_round() { echo $((13 + ($1 % 4 == 0 ? 1 : 0))); }
round_sql() {
	local r=$1 kinds="'sqlj', 'sqlj', 'execj', 'httpj', 'limj', 'limj'"
	[ $((r % 4)) -eq 0 ] && kinds="$kinds, 'execslow'"
	cat <<EOF
select count(pgjob.enqueue(k, jsonb_build_object('r', $r, 'i', i),
	queue => case k when 'limj' then 'lim' else 'default' end))
	from unnest(array[$kinds]) with ordinality t(k, i);
select pgjob.enqueue_workflow(jsonb_build_object('name', 'wf $r', 'steps', jsonb_build_array(
	jsonb_build_object('name', 'a', 'kind', 'sqlj', 'payload', jsonb_build_object('r', $r)),
	jsonb_build_object('name', 'b', 'kind', 'execj', 'after', array['a'], 'payload', jsonb_build_object('r', $r)),
	jsonb_build_object('name', 'c', 'kind', 'sqlj', 'after', array['a'], 'payload', jsonb_build_object('r', $r)),
	jsonb_build_object('name', 'd', 'kind', 'sqlj', 'after', array['b', 'c'], 'payload', jsonb_build_object('r', $r)))));
do \$\$
declare
	b bigint := pgjob.batch_open('cbj', '{"r": $r}', name => 'batch $r');
begin
	perform pgjob.enqueue('sqlj', jsonb_build_object('r', $r, 'i', i), batch_id => b)
		from generate_series(1, 3) i;
	perform pgjob.batch_seal(b);
end
\$\$;
EOF
}
enqueuer() {
	local r=0
	while [ ! -e "$dir/stop" ]; do
		r=$((r + 1))
		echo "$r" >>"$dir/enq.tried"
		if q -c "$(round_sql "$r")" >/dev/null 2>>"$dir/enq.err"; then
			echo "$r" >>"$dir/enq.acked"
		fi
		sleep 1
	done
}
# The sampler: every half second, the limited queue's live leases and each
# running job's lease token.
sampler() {
	while [ ! -e "$dir/stop" ]; do
		q -F ' ' -c "select extract(epoch from now())::numeric(16, 3),
			(select count(*) from pgjob.all_jobs where queue = 'lim'
			and state = 'running' and locked_until > now()),
			(select coalesce(string_agg(id || ':' || lease_token, ' '), '')
			from pgjob.all_jobs where state = 'running')" \
			>>"$dir/samples" 2>/dev/null || true
		sleep 0.5
	done
}
: >"$dir/enq.tried"
: >"$dir/enq.acked"
: >"$dir/samples"
enqueuer &
PID[enq]=$!
sampler &
PID[sampler]=$!

# ---------------------------------------------------------------------
# The checks.

load_ledgers_once() {
	local h
	q -c "drop table if exists ledger_exec, ledger_http, acked, samples, tokens" \
		-c "create table ledger_exec (host text, queue text, job_id bigint, token bigint,
		start_ns bigint, end_ns bigint, pid int)" \
		-c "create table ledger_http (job_id bigint, addr text)" \
		-c "create table acked (r int)" \
		-c "create table samples (at numeric, lim int)" \
		-c "create table tokens (at numeric, job_id bigint, token bigint)" || return 1
	for h in "${apps[@]}"; do
		awk -v h="$h" '{print h "\tdefault\t" $1 "\t" $2 "\t" $3 "\t" $4 "\t" $5}' \
			"$dir/ledger.exec.$h" >"$dir/ledger.tsv"
		awk -v h="$h" '{print h "\tlim\t" $1 "\t" $2 "\t" $3 "\t" $4 "\t" $5}' \
			"$dir/ledger.lim.$h" >>"$dir/ledger.tsv"
		q -c "\\copy ledger_exec from '$dir/ledger.tsv'" || return 1
	done
	tr ' ' '\t' <"$dir/ledger.http" >"$dir/ledger.http.tsv"
	q -c "\\copy ledger_http from '$dir/ledger.http.tsv'" || return 1
	cp "$dir/enq.acked" "$dir/acked.tsv"
	q -c "\\copy acked from '$dir/acked.tsv'" || return 1
	awk '{print $1 "\t" $2}' "$dir/samples" >"$dir/samples.tsv"
	q -c "\\copy samples from '$dir/samples.tsv'" || return 1
	awk '{for (i = 3; i <= NF; i++) { split($i, p, ":"); print $1 "\t" p[1] "\t" p[2] }}' \
		"$dir/samples" >"$dir/tokens.tsv"
	q -c "\\copy tokens from '$dir/tokens.tsv'" || return 1
}
# load_ledgers: the ledgers, the acknowledged rounds and the samples as
# tables, again from the start if a failover cut it short.
load_ledgers() {
	local i
	for i in $(seq 1 60); do
		load_ledgers_once 2>/dev/null && return 0
		sleep 1
	done
	load_ledgers_once
}

# check WHEN: every invariant over the jobs enqueued so far; with "final",
# every job must have ended too.
dup_exec=0
dup_http=0
check() {
	local when=$1 bad tried snap
	# A handler's line is written before its job's end: a job that ended
	# before snap has its line in the files read after it.
	snap=$(qr "select now()")
	load_ledgers
	tried=$(tail -n 1 "$dir/enq.tried")
	# The rounds: an acknowledged one is all there, any other whole or absent.
	bad=$(qr "with n as (select (payload->>'r')::int r, count(*) n from pgjob.all_jobs
		where kind <> 'cbj' and payload ? 'r' group by 1)
		select count(*) from generate_series(1, $tried) g(r) left join n using (r)
		where case when r in (select r from acked)
		then coalesce(n.n, 0) <> 13 + (r % 4 = 0)::int
		else coalesce(n.n, 0) not in (0, 13 + (r % 4 = 0)::int) end")
	[ "$bad" -eq 0 ] || fail "$when: $bad rounds lost or partly there: $(qr "with n as (select (payload->>'r')::int r, count(*) n from pgjob.all_jobs where kind <> 'cbj' and payload ? 'r' group by 1) select string_agg(a.r || '=' || coalesce(n.n, 0), ' ') from acked a left join n using (r) where coalesce(n.n, 0) <> 13 + (a.r % 4 = 0)::int")"
	if [ "$when" = final ]; then
		bad=$(qr "select count(*) from pgjob.all_jobs where state <> 'done'")
		[ "$bad" -eq 0 ] || fail "$when: $bad jobs not done: $(qr "select string_agg(id || ' ' || kind || ' ' || state, '; ') from (select * from pgjob.all_jobs where state <> 'done' order by id limit 5) x")"
	fi
	bad=$(qr "select count(*) from pgjob.all_jobs j where j.kind in ('sqlj', 'tickj')
		and j.state = 'done' and ((select count(*) from ledger_sql l where l.job_id = j.id) <> 1
		or not exists (select from ledger_sql l where l.job_id = j.id and l.token = j.lease_token))")
	[ "$bad" -eq 0 ] || fail "$when: $bad sql jobs done without exactly one ledger row under their final token"
	bad=$(qr "select count(*) from ledger_sql l left join pgjob.all_jobs j on j.id = l.job_id
		where j.state is distinct from 'done'")
	[ "$bad" -eq 0 ] || fail "$when: $bad sql ledger rows of jobs not done"
	bad=$(qr "select count(*) from pgjob.all_jobs j where j.kind in ('execj', 'execslow', 'limj')
		and j.state = 'done' and j.finished_at < '$snap' and not exists (select from ledger_exec l where l.job_id = j.id
		and l.token = j.lease_token)")
	[ "$bad" -eq 0 ] || fail "$when: $bad exec jobs done without a ledger line of their final run"
	bad=$(qr "select count(*) from (select job_id, token from ledger_exec group by 1, 2
		having count(*) > 1) x")
	[ "$bad" -eq 0 ] || fail "$when: $bad exec lease tokens that ran twice"
	bad=$(qr "select count(*) from pgjob.all_jobs j where kind = 'httpj' and state = 'done'
		and j.finished_at < '$snap' and not exists (select from ledger_http l where l.job_id = j.id)")
	[ "$bad" -eq 0 ] || fail "$when: $bad http jobs done and never received"
	dup_exec=$(qr "select count(*) from ledger_exec l join pgjob.all_jobs j on j.id = l.job_id
		where l.token < j.lease_token")
	dup_http=$(qr "select coalesce(sum(n - 1), 0) from (select job_id, count(*) n
		from ledger_http group by 1) x")
	# A second run is allowed only where the first one lost its lease,
	# which its worker logs for that job (a run whose end a demoted
	# primary had accepted, then lost, would not be).
	local id
	for id in $(qr "select distinct l.job_id from ledger_exec l join pgjob.all_jobs j
		on j.id = l.job_id where l.token < j.lease_token union select job_id
		from ledger_http group by 1 having count(*) > 1"); do
		grep -q "job=$id .*\(lease lost\|lease not renewed\|giving up writing its end\)" \
			"$dir"/a?.log || fail "$when: job $id ran twice, and its earlier run did not lose its lease"
	done
	# Workflows: each step ran once (above, for its kind) and only after
	# every parent had ended.
	bad=$(qr "select count(*) from pgjob.job_deps d join pgjob.all_jobs c on c.id = d.child
		join pgjob.all_jobs p on p.id = d.parent join ledger_sql l on l.job_id = c.id
		where p.finished_at is null or l.at < p.finished_at")
	[ "$bad" -eq 0 ] || fail "$when: $bad workflow steps ran before a parent ended"
	# Batches: one callback job and one ledger row per finished batch.
	bad=$(qr "select count(*) from pgjob.batches b where b.finished_at is not null and
		((select count(*) from pgjob.all_jobs j where j.kind = 'cbj'
		and (j.payload #>> '{pgjob,batch,id}')::bigint = b.id) <> 1
		or (select count(*) from pgjob.all_jobs j where j.id = b.callback_job and j.state = 'done')
		= 1 and (select count(*) from ledger_cb c where c.batch_id = b.id) <> 1)")
	[ "$bad" -eq 0 ] || fail "$when: $bad batches without exactly one callback"
	if [ "$when" = final ]; then
		bad=$(qr "select count(*) from pgjob.batches where finished_at is null
			or callback_job is null")
		[ "$bad" -eq 0 ] || fail "$when: $bad batches never finished"
	fi
	# The limited queue: live leases sampled, the ledger's overlaps, and
	# the starts the database recorded (each attempt's) in any second.
	lim_sampled=$(qr "select coalesce(max(lim), 0) from samples")
	[ "$lim_sampled" -le 2 ] || fail "$when: $lim_sampled jobs of queue lim held leases at once (global_concurrency 2)"
	lim_overlap=$(qr "select coalesce(max(n), 0) from (select (select count(*) from ledger_exec o
		where o.queue = 'lim' and o.start_ns <= l.start_ns and o.end_ns > l.start_ns) n
		from ledger_exec l where l.queue = 'lim') x")
	[ "$lim_overlap" -le 2 ] || fail "$when: $lim_overlap runs of queue lim overlapped (global_concurrency 2)"
	lim_rate=$(qr "with s as (select attempted_at t from pgjob.all_jobs where queue = 'lim'
		and attempted_at is not null union all select a.started_at from pgjob.attempts a
		join pgjob.all_jobs j on j.id = a.job_id where j.queue = 'lim' and a.started_at is not null)
		select coalesce(max((select count(*) from s s2 where s2.t >= s.t
		and s2.t < s.t + interval '1 second')), 0) from s")
	[ "$lim_rate" -le 6 ] || fail "$when: $lim_rate starts of queue lim within a second (rate 4/s, burst 2)"
	# Schedules: one job per tick.
	ticks=$(qr "select count(*) || '/' || count(distinct unique_key) from pgjob.all_jobs
		where kind = 'tickj'")
	[ "${ticks%/*}" = "${ticks#*/}" ] || fail "$when: ticks (jobs/distinct) $ticks"
	# Fencing: no job's token below one seen earlier, by the sampler or
	# in a ledger line.
	bad=$(qr "select count(*) from (select job_id, token, max(token) over (partition by job_id
		order by at rows between unbounded preceding and 1 preceding) m from tokens) x
		where token < m")
	bad2=$(qr "select count(*) from (select job_id from tokens group by 1) t
		join pgjob.all_jobs j on j.id = t.job_id where j.lease_token < (select max(token)
		from tokens t2 where t2.job_id = t.job_id)")
	bad3=$(qr "select count(*) from ledger_exec l join pgjob.all_jobs j on j.id = l.job_id
		where l.token > j.lease_token")
	[ $((bad + bad2 + bad3)) -eq 0 ] ||
		fail "$when: lease tokens went back: $bad between samples, $bad2 below a sample at the end, $bad3 below a ledger line"
}

# outage_ms SINCE_NS: the longest stretch without a job ending, from
# SINCE_NS (a fault) on, over the next 120 s.
outage_ms() {
	qr "with e as (select $1::numeric / 1e9 t union all select extract(epoch from finished_at)
		from pgjob.all_jobs where finished_at >= to_timestamp($1::numeric / 1e9)
		and finished_at < to_timestamp($1::numeric / 1e9 + 120))
		select round(coalesce(max(d), 0) * 1000) from (select lead(t) over (order by t) - t d from e) x"
}

# progress: jobs ended since a moment, to wait for the load to flow again.
ended_since() {
	[ "$(qr "select count(*) from pgjob.all_jobs where finished_at > to_timestamp($1::numeric / 1e9)")" -ge "$2" ]
}

# ---------------------------------------------------------------------
# The faults.

postmaster_pid() { head -n 1 "$base/$1/postmaster.pid"; }
slowed=
# slow MEMBER: what the bridge sends MEMBER (the WAL it streams) slowed:
# netem's delay if the kernel has it, else tbf's trickle.
slow() {
	if ip netns exec "$netlib_sw" tc qdisc add dev "v$1" root netem delay 200ms 2>/dev/null; then
		slowed=netem_200ms
	else
		ip netns exec "$netlib_sw" tc qdisc add dev "v$1" root tbf rate 100kbit burst 16kbit latency 5s
		slowed=tbf_100kbit
	fi
}
unslow() { ip netns exec "$netlib_sw" tc qdisc del dev "v$1" root 2>/dev/null || true; }

fault() { # NAME: inject; WHAT says what it did
	local f=$1 old sync e
	old=$(leader)
	sync=$(sync_standby)
	case $f in
	switchover)
		pctl switchover --leader "$old" --candidate "$sync" --force >>"$dir/ctl.log" 2>&1
		WHAT="$old->$sync" ;;
	failover)
		pctl failover --candidate "$sync" --force >>"$dir/ctl.log" 2>&1
		WHAT="$old->$sync" ;;
	kill9)
		kill -KILL "$(postmaster_pid "$old")"
		WHAT="$old" ;;
	cut_primary)
		netlib_link "$old" down
		CUT=$old
		WHAT="$old" ;;
	dcs_cut_primary)
		# Only etcd out of the primary's reach (blackhole routes on its
		# host): pgjobd, HAProxy and the standbys still reach it, and
		# it must demote itself before another member is promoted.
		for e in "${etcds[@]}"; do in_ns "$old" ip route add blackhole "${ADDR[$e]}/32"; done
		CUT=$old
		WHAT="$old" ;;
	etcd_leader_killed)
		e=$(etcd_leader) || die "no etcd leader"
		kill -KILL "${PID[$e]}"
		wait "${PID[$e]}" 2>/dev/null || true
		KILLED=$e
		WHAT="$e" ;;
	etcd_member_cut)
		e=$(etcd_leader) || die "no etcd leader"
		netlib_link "$e" down
		CUT=$e
		WHAT="$e" ;;
	lagging_failover)
		# The asynchronous standby slowed until it lags a megabyte of
		# WAL (or for 90 s), then the primary's host crashes (Patroni and
		# PostgreSQL killed): the member promoted must be the
		# synchronous standby, never the lagging one.
		SLOWED=$(members | awk '$2 == "Replica" { print $1; exit }')
		[ -n "$SLOWED" ] || die "no asynchronous standby to slow: $(members | tr '\n' ';')"
		slow "$SLOWED"
		local end=$(($(date +%s) + 90))
		while :; do
			LAG=$(qr "select coalesce(max(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)), 0)
				from pg_stat_replication where application_name = '$SLOWED'")
			[ "$LAG" -lt 1048576 ] && [ "$(date +%s)" -lt "$end" ] || break
			sleep 0.5
		done
		kill -KILL "${PID[$old]}"
		wait "${PID[$old]}" 2>/dev/null || true
		kill -KILL "$(postmaster_pid "$old")"
		CRASHED=$old
		WHAT="$old(crashed),$SLOWED(lagging)" ;;
	esac
}
# wait_demoted FAULT: Patroni on CUT's host, out of etcd's reach, must
# demote it: its PostgreSQL read-only, asked on its own socket (stopped
# counts as well while it restarts: it accepts no write either).
wait_demoted() {
	local end=$(($(date +%s) + 90)) ro=f
	while [ "$(date +%s)" -lt "$end" ]; do
		ro=$(in_ns "$CUT" setpriv --reuid=postgres --regid=postgres --init-groups \
			"$pgbin/psql" -X -At -h "$base/$CUT.sock" -d postgres \
			-c "select pg_is_in_recovery()" 2>/dev/null) || ro=stopped
		[ "$ro" = t ] && break
		sleep 0.5
	done
	[ "$ro" = t ] || [ "$ro" = stopped ] || fail "$1: $CUT still a primary 90 s after the cut"
	[ "$ro" = t ] && ro=standby
	DEMOTED=$ro
}
new_leader() { # OLD: a leader other than OLD runs
	local l
	l=$(leader)
	[ -n "$l" ] && [ "$l" != "$1" ]
}
# heal: undo a fault's damage once its effect has been seen, and wait for a
# healthy cluster again.
heal() {
	local f=$1
	case $f in
	cut_primary)
		wait_demoted "$f"
		wait_until 120 "a new leader" new_leader "$CUT"
		netlib_link "$CUT" up ;;
	dcs_cut_primary)
		wait_demoted "$f"
		wait_until 120 "a new leader" new_leader "$CUT"
		for e in "${etcds[@]}"; do in_ns "$CUT" ip route del blackhole "${ADDR[$e]}/32"; done ;;
	etcd_member_cut) netlib_link "$CUT" up ;;
	etcd_leader_killed) start_etcd "$KILLED" ;;
	lagging_failover)
		wait_until 120 "a new leader" new_leader "$CRASHED"
		[ "$(leader)" != "$SLOWED" ] || fail "lagging_failover: the lagging $SLOWED was promoted"
		WHAT="$WHAT->$(leader)"
		unslow "$SLOWED"
		start_patroni "$CRASHED" ;;
	esac
	wait_until 300 "a healthy cluster after $f" healthy
}

if [ "$quick" = 1 ]; then
	faults=(switchover kill9 cut_primary)
else
	faults=(switchover failover kill9 cut_primary dcs_cut_primary etcd_leader_killed
		etcd_member_cut lagging_failover)
fi
# The load runs a while before the first fault.
wait_until 120 "the load flowing" ended_since "$(date +%s%N)" 50
for f in "${faults[@]}"; do
	wait_until 120 "the load flowing before $f" ended_since "$(date +%s%N)" 20
	at=$(date +%s%N)
	fault "$f"
	what=$WHAT
	note "$f: $what"
	wait_until 180 "jobs ending after $f" ended_since "$at" 30
	heal "$f"
	wait_until 120 "4 pgjobd workers after $f" live_workers
	# The longest outage lies within the 120 s after the fault: wait for
	# the load to flow that long, or more than 30 s past healing.
	out=$(outage_ms "$at")
	check "$f"
	line="scenario=ha fault=$f what=$what outage_ms=$out leader=$(leader) duplicate_runs=$dup_exec+$dup_http lim_max=$lim_sampled/$lim_overlap/$lim_rate ticks=$ticks"
	case $f in
	cut_primary | dcs_cut_primary) line="$line demoted_primary=${DEMOTED:-}" ;;
	lagging_failover) line="$line slowed=$slowed lag_bytes=${LAG:-}" ;;
	esac
	echo "$line"
done

# A schedule tick at least: ticks are whole minutes.
ticked() { [ "$(qr "select count(*) from pgjob.all_jobs where kind = 'tickj'")" -gt 0 ]; }
wait_until 90 "a tick of schedule 'tick'" ticked
touch "$dir/stop"
wait "${PID[enq]}" || true
wait "${PID[sampler]}" || true
unset 'PID[enq]' 'PID[sampler]'
drained() { [ "$(qr "select count(*) from pgjob.all_jobs where state <> 'done'")" -eq 0 ]; }
wait_until 300 "every job done" drained
check final
for h in "${apps[@]}"; do
	kill -TERM "${PID[$h]}"
	st=0
	wait "${PID[$h]}" || st=$?
	[ "$st" -eq 0 ] || fail "pgjobd on $h exited with $st on SIGTERM, want 0"
	unset "PID[$h]"
done

jobs=$(qr "select count(*) from pgjob.all_jobs")
# Both ways of connecting ran jobs: a1 multi-host, a2 through HAProxy.
per_host=$(qr "select string_agg(host || ':' || n, ',' order by host) from
	(select host, count(*) n from ledger_sql group by 1) x")
for h in "${apps[@]}"; do
	case ",$per_host" in
	*",$h:"*) ;;
	*) fail "$h ran no sql job: $per_host" ;;
	esac
done
rounds="$(wc -l <"$dir/enq.acked")/$(wc -l <"$dir/enq.tried")"
# What a demoted primary (or a standby) refused pgjobd: SQLSTATE 25006,
# or the read-write check of the multi-host conninfo.
ro_refusals=$(cat "$dir"/a?.log | grep -c 'read-only' || true)
wall=$(($(date +%s) - begin))
echo "scenario=ha faults=${#faults[@]} jobs=$jobs sql_runs_per_host=$per_host read_only_refusals=$ro_refusals rounds_acked=$rounds duplicate_runs=$dup_exec+$dup_http ticks=$ticks lim_max=$lim_sampled/$lim_overlap/$lim_rate invariant_failures=$fails wall_s=$wall"
[ "$fails" -eq 0 ] || die "$fails invariants broken"
