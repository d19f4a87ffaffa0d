#!/usr/bin/env bash
# fault.netns (docs/faults.md#several-hosts-faultnetns): three hosts built
# as Linux network namespaces on this machine, two pgjobd instances on each,
# PostgreSQL (a primary and a synchronous standby, tests/fault/cluster.sh)
# in a fourth namespace and the receiver of the http jobs in a fifth, all
# on a bridge in a sixth:
#
#   h1 10.231.0.11 ─┐                      ┌─ db  10.231.0.10 (n1, n2)
#   h2 10.231.0.12 ─┼─ sw (bridge br0) ────┤
#   h3 10.231.0.13 ─┘                      └─ web 10.231.0.20:8080
#
# Each host namespace also has a hostname of its own (unshare --uts), so
# locked_by, pgjob.workers.host and the task leases' holders name it.  h2's
# instances run an hour behind (libfaketime), h3's an hour ahead.  The run:
#
#   1. spread: jobs of every handler type (sql, exec, http, plugin) run on
#      every host; slots are unique cluster-wide; the task's partitions are
#      shared by the three hosts;
#   2. cut: h2's veth, at the bridge, goes down for longer than the lease
#      while it holds jobs; its jobs are taken over, its task partitions
#      move to h1 and h3, its handlers and task commands are stopped, and
#      when the link comes back its late ends are refused and it rejoins;
#   3. failover: the primary is crashed and the standby promoted while
#      jobs flow; no instance is restarted;
#   4. the checks: every job ends done, exactly once in the sql ledger, at
#      least once in the exec and http ledgers with any second run on the
#      cut host (or a run whose worker logged losing that job's lease), one
#      job per schedule tick, no host clock in the tables, every instance
#      stops with exit 0 and leaves no process behind.
#
# It prints one figures line.  Root only (ip netns); without root or
# namespaces it exits 77, which ctest reports as skipped.  Every address
# lives on a veth inside the namespaces it creates, and a trap deletes them
# (and kills what runs in them) whatever happens.
#
#   PGJOBD_TEST_BIN=build PGJOBD_SOURCE=. tests/fault/netns.sh
#
# PGJOBD_NETNS_JOBS=N sets the jobs per phase (300 by default);
# PGJOBD_NETNS_KEEP=1 keeps the logs and ledgers of a run that passed.
set -euo pipefail

src=${PGJOBD_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# shellcheck source=tests/fault/netlib.sh
. "$src/tests/fault/netlib.sh"
bin=${PGJOBD_TEST_BIN:-$src/build}
njobs=${PGJOBD_NETNS_JOBS:-300}
lease_s=3
cut_host=h2

skip() {
	echo "fault.netns: SKIPPED: $*" >&2
	exit 77
}

[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (ip netns); run as root"
command -v ip >/dev/null || skip "no ip command (Debian package iproute2)"
command -v unshare >/dev/null || skip "no unshare command (util-linux)"
command -v python3 >/dev/null || {
	echo "fault.netns: python3 is missing (scripts/deps.sh installs it)" >&2
	exit 1
}

# Names unique to this run, short enough for interface names.
tag=$(($$ % 100000))
declare -A NS ADDR
for n in sw db web h1 h2 h3; do NS[$n]=pgjn$tag$n; done
ADDR=([db]=10.231.0.10 [h1]=10.231.0.11 [h2]=10.231.0.12 [h3]=10.231.0.13
	[web]=10.231.0.20)
hosts=(h1 h2 h3)
# Two instances per host: i0 i1 on h1, i2 i3 on h2, i4 i5 on h3.
ninst=6
workers=2
host_of() { echo "h$(($1 / 2 + 1))"; }

dir=$bin/tmp/netns-$$
cdir=$dir/pg
declare -a SUP
web_pid=
created=()
fails=0
begin=$(date +%s)

cleanup() {
	local rc=$? n p
	trap - EXIT INT TERM
	for p in "${SUP[@]}" $web_pid; do
		if [ -n "$p" ]; then kill -TERM "$p" 2>/dev/null || true; fi
	done
	if [ -f "$cdir/conninfo" ]; then
		ip netns exec "${NS[db]}" bash "$src/tests/fault/cluster.sh" stop "$cdir" \
			>/dev/null 2>&1 || true
	fi
	# Whatever still runs in the namespaces was started by this test.
	netlib_teardown
	if [ "$rc" -eq 77 ] || { [ "$rc" -eq 0 ] && [ -z "${PGJOBD_NETNS_KEEP:-}" ]; }; then
		rm -rf "$dir"
	else
		echo "fault.netns: logs, configs and ledgers left in $dir" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

note() { echo "[netns] $*" >&2; }
fail() {
	echo "NETNS INVARIANT: $*" >&2
	fails=$((fails + 1))
}
die() {
	echo "fault.netns: $*" >&2
	exit 1
}

# ---------------------------------------------------------------------
# The network: a bridge in sw, one veth pair per namespace.

mkdir -p "$dir"
netlib_switch "${NS[sw]}" ||
	skip "cannot create a network namespace: $netlib_err"
for n in db web h1 h2 h3; do netlib_host "$n"; done
note "namespaces ${created[*]} on 10.231.0.0/24"

# ---------------------------------------------------------------------
# PostgreSQL in db, the http receiver in web.

PGJOBD_CLUSTER_ADDR=${ADDR[db]} PGJOBD_CLUSTER_CLIENTS=10.231.0.0/24 \
	ip netns exec "${NS[db]}" bash "$src/tests/fault/cluster.sh" pair "$cdir" >&2
pgbin=$(cat "$cdir/bindir")
port=$(cat "$cdir/n1.port")
for n in h1 h2 h3; do
	ip netns exec "${NS[$n]}" timeout 10 bash -c \
		"exec 3<>/dev/tcp/${ADDR[db]}/$port" ||
		die "$n cannot reach ${ADDR[db]}:$port over the bridge"
done
ci="$(cat "$cdir/conninfo") dbname=netns"
# The workers notice a dead path within seconds: keepalives and
# tcp_user_timeout for the kernel's view, the lease for pgjobd's own.
wci="$ci keepalives=1 keepalives_idle=1 keepalives_interval=1 keepalives_count=2 tcp_user_timeout=3000"

# q SQL...: one statement on the primary, from the db namespace.
q() {
	PGOPTIONS="-c client_min_messages=warning" \
		ip netns exec "${NS[db]}" "$pgbin/psql" -X -q -At -v ON_ERROR_STOP=1 \
		-d "$ci" "$@"
}
# qr SQL: the same, tried again for up to 60 s (a failover in between).
qr() {
	local i out
	for i in $(seq 1 120); do
		out=$(q -c "$1" 2>/dev/null) && { echo "$out"; return 0; }
		sleep 0.5
	done
	die "no answer from the database for 60 s to: $1"
}

ip netns exec "${NS[db]}" "$pgbin/psql" -X -q -At -v ON_ERROR_STOP=1 \
	-d "$(cat "$cdir/conninfo")" -c "create database netns"
ip netns exec "${NS[db]}" "$bin/pgjob" --database "$ci" migrate >/dev/null
# No unique key: a second run would be counted, not hidden.
q -c "create table ledger_sql (job_id bigint not null, token bigint not null,
	host text not null)"

: >"$dir/ledger.http"
ip netns exec "${NS[web]}" python3 "$src/tests/fault/netns_http.py" \
	"${ADDR[web]}" 8080 "$dir/ledger.http" </dev/null >"$dir/web.log" 2>&1 &
web_pid=$!

# ---------------------------------------------------------------------
# The instances.

ftlib=
for f in /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 \
	/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1 \
	/usr/lib/faketime/libfaketimeMT.so.1; do
	[ -r "$f" ] && { ftlib=$f; break; }
done
[ -n "$ftlib" ] || note "libfaketime not found (apt-get install faketime): every host on the real clock"
declare -A SKEW=([h1]=0 [h2]=-1h [h3]=+1h)

plugin=$bin/pgjobd_example.so
[ -f "$plugin" ] || die "no $plugin: build the tree first"
for i in $(seq 0 $((ninst - 1))); do
	h=$(host_of "$i")
	: >"$dir/ledger.exec.$h"
	cat >"$dir/i$i.yaml" <<EOF
database:
  conninfo: "$wci"
workers: $workers
lease: ${lease_s}s
poll_interval: 250ms
shutdown_timeout: 10s
log: { level: info }
defaults: { timeout: 60s, max_attempts: 1000, backoff: { base: 100ms, max: 1s } }
queues: { default: { concurrency: 4 } }
handlers:
  sqlj: { type: sql, statement: "insert into ledger_sql (job_id, token, host) select \$2, j.lease_token, split_part(j.locked_by, ':', 1) from pgjob.all_jobs j where j.id = \$2 and \$1 is not null" }
  execj: { type: exec, command: ["/bin/sh", "$src/tests/fault/ledger.sh", "$dir/ledger.exec.$h", "0.2"] }
  execslow: { type: exec, command: ["/bin/sh", "$src/tests/fault/ledger.sh", "$dir/ledger.exec.$h", "$((lease_s + 1))"] }
  httpj: { type: http, url: "http://${ADDR[web]}:8080/hook", timeout: 10s }
  plugj: { type: plugin, library: "$plugin", symbol: pgjobd_example }
schedules:
  tick: { cron: "* * * * *", kind: plugj }
tasks:
  part: { command: ["/bin/sleep", "3600"], partitions: 12 }
EOF
done

start_inst() {
	local i=$1 h env=()
	h=$(host_of "$i")
	[ -n "$ftlib" ] && [ "${SKEW[$h]}" != 0 ] &&
		env=("LD_PRELOAD=$ftlib" "FAKETIME=${SKEW[$h]}")
	# The instance's own UTS namespace gives it its host's name.
	ip netns exec "${NS[$h]}" unshare --uts sh -c \
		'hostname "$1" && shift && exec env "$@"' sh "$h" "${env[@]}" \
		"$bin/pgjobd" -c "$dir/i$i.yaml" </dev/null >"$dir/i$i.log" 2>&1 &
	SUP[i]=$!
}

# wait_for SECONDS WHAT SQL: until SQL answers t; dies after SECONDS.
wait_for() {
	local end=$(($(date +%s) + $1))
	while [ "$(qr "$3")" != t ]; do
		sample_leases
		[ "$(date +%s)" -lt "$end" ] || die "waited $1 s in vain for $2"
		sleep 0.25
	done
}

# The longest lease seen, from the database's now(): a host clock that
# leaked into a lease would make it an hour long, or expired at birth.
max_lease=0
sample_leases() {
	local v
	v=$(q -c "select coalesce(round(max(abs(extract(epoch from
		locked_until - now())))::numeric, 1), 0) from pgjob.all_jobs
		where state = 'running'" 2>/dev/null) || return 0
	max_lease=$(echo "$max_lease $v" | awk '{print ($2 > $1) ? $2 : $1}')
}

# enqueue N: N jobs, a quarter of each handler type, and 1 in 50 execslow.
total=0
enqueue() {
	qr "select count(pgjob.enqueue(case when i % 50 = 7 then 'execslow'
		else (array['sqlj', 'execj', 'httpj', 'plugj'])[i % 4 + 1] end,
		jsonb_build_object('i', i))) from generate_series($((total + 1)),
		$((total + $1))) i" >/dev/null
	total=$((total + $1))
}

all_done="select count(*) = 0 from pgjob.all_jobs where state <> 'done'"
live_workers() {
	echo "select count(*) = $1 from pgjob.workers where
		heartbeat_at > now() - interval '$lease_s seconds'"
}
# Per host, the task partitions whose lease is current.
parts_by_host() {
	qr "select coalesce(string_agg(h || ':' || n, ',' order by h), '') from
		(select split_part(holder, '/', 1) h, count(*) n from pgjob.leases
		where name like 'task:part:%' and holder is not null
		and expires_at > now() group by 1) x"
}

for i in $(seq 0 $((ninst - 1))); do start_inst "$i"; done
t0=$(date +%s)
wait_for 90 "all $((ninst * workers)) workers registered" "$(live_workers $((ninst * workers)))"
wait_for 60 "the 12 task partitions shared by all hosts" \
	"select count(*) = 12 and count(distinct split_part(holder, '/', 1)) = 3
	from pgjob.leases where name like 'task:part:%' and expires_at > now()"

# ---------------------------------------------------------------------
# 1. Spread.

enqueue "$njobs"
wait_for 180 "the first jobs done" "$all_done"
slots=$(qr "select count(*) || '/' || count(distinct slot) || '/' ||
	count(distinct host) from pgjob.workers")
locks=$(qr "select count(distinct objid) || '/' || count(distinct pid) from
	pg_locks where locktype = 'advisory' and classid = 1885825634
	and objsubid = 2 and granted")
n=$((ninst * workers))
[ "$slots" = "$n/$n/3" ] || fail "slots (rows/distinct/hosts) $slots, want $n/$n/3"
[ "$locks" = "$n/$n" ] || fail "slot locks (slots/backends) $locks, want $n/$n"
parts_before=$(parts_by_host)
note "slots $slots, slot locks $locks, task partitions $parts_before"

# Jobs per host, from the ledgers: sql rows, exec lines, http requests.
load_ledgers() {
	q -c "drop table if exists ledger_exec, ledger_http" \
		-c "create table ledger_exec (host text, job_id bigint, token bigint,
		start_ns bigint, end_ns bigint, pid int)" \
		-c "create table ledger_http (job_id bigint, addr text)"
	for h in "${hosts[@]}"; do
		awk -v h="$h" '{print h "\t" $1 "\t" $2 "\t" $3 "\t" $4 "\t" $5}' \
			"$dir/ledger.exec.$h" >"$dir/ledger.exec.tsv"
		q -c "\\copy ledger_exec from '$dir/ledger.exec.tsv'"
	done
	tr ' ' '\t' <"$dir/ledger.http" >"$dir/ledger.http.tsv"
	q -c "\\copy ledger_http from '$dir/ledger.http.tsv'"
}
per_host() {
	load_ledgers
	qr "select string_agg(h || ':' || coalesce(s, 0) || '+' || coalesce(e, 0)
		|| '+' || coalesce(w, 0), ',' order by h) from
		(values ('h1', '${ADDR[h1]}'), ('h2', '${ADDR[h2]}'),
			('h3', '${ADDR[h3]}')) v(h, a)
		left join (select host, count(*) s from ledger_sql group by 1) s
			on s.host = v.h
		left join (select host, count(*) e from ledger_exec group by 1) e
			on e.host = v.h
		left join (select addr, count(*) w from ledger_http group by 1) w
			on w.addr = v.a"
}
spread=$(per_host)
note "runs per host (sql+exec+http): $spread"
for h in "${hosts[@]}"; do
	case ",$spread" in
	*",$h:0+0+0"*) fail "host $h ran no job: $spread" ;;
	esac
done

# ---------------------------------------------------------------------
# 2. Cut h2 off while it holds jobs.

# The cut host must hold a job longer than the lease: slow jobs, a dozen
# at a time, until it has claimed one.
for round in $(seq 1 10); do
	qr "select count(pgjob.enqueue('execslow', jsonb_build_object('round', $round)))
		from generate_series(1, 12)" >/dev/null
	total=$((total + 12))
	end=$(($(date +%s) + 5))
	while [ "$(qr "select count(*) > 0 from pgjob.all_jobs where state = 'running'
		and kind = 'execslow' and locked_by like '$cut_host:%'")" != t ]; do
		[ "$(date +%s)" -lt "$end" ] || continue 2
		sleep 0.1
	done
	break
done
enqueue "$njobs"
wait_for 60 "$cut_host to hold a slow job" \
	"select count(*) > 0 from pgjob.all_jobs where state = 'running'
	and kind = 'execslow' and locked_by like '$cut_host:%'"
q -c "create table cut_held as select id, kind, lease_token from pgjob.all_jobs
	where state = 'running' and locked_by like '$cut_host:%'"
netlib_link "$cut_host" down
cut_at=$(date +%s%N)
held=$(qr "select count(*) from cut_held")
note "$cut_host cut off at the bridge, holding $held jobs"
h2logs=("$dir/i2.log" "$dir/i3.log")
count_h2() { cat "${h2logs[@]}" | grep -c -- "$1" || true; }
lost_before=$(count_h2 "lease lost")
wait_for 60 "$cut_host's jobs to be taken over" \
	"select count(*) = 0 from cut_held c join pgjob.all_jobs j using (id)
	where j.state = 'running' and j.lease_token = c.lease_token"
takeover_ms=$((($(date +%s%N) - cut_at) / 1000000))
wait_for 60 "$cut_host's task partitions to move" \
	"select count(*) = 12 from pgjob.leases where name like 'task:part:%'
	and expires_at > now() and holder not like '$cut_host/%'"
parts_cut=$(parts_by_host)
# What the cut host noticed on its own, from its logs; the link stays down
# for two leases at least.
end=$(($(date +%s) + 60))
until [ "$(count_h2 'stopped (lease lost)')" -gt 0 ] &&
	[ $(($(date +%s%N) - cut_at)) -ge $((2 * lease_s * 1000000000)) ]; do
	[ "$(date +%s)" -lt "$end" ] || die "$cut_host never stopped its task commands"
	sleep 0.25
done
cut_ms=$((($(date +%s%N) - cut_at) / 1000000))
netlib_link "$cut_host" up
note "link back after $cut_ms ms; task partitions during the cut: $parts_cut"
wait_for 120 "$cut_host to rejoin" \
	"select count(*) = $((2 * workers)) from pgjob.workers where host = '$cut_host'
	and heartbeat_at > now() - interval '$lease_s seconds'"
wait_for 120 "$cut_host to hold task partitions again" \
	"select count(*) > 0 from pgjob.leases where name like 'task:part:%'
	and expires_at > now() and holder like '$cut_host/%'"
wait_for 180 "the cut phase's jobs done" "$all_done"
taken_over=$(qr "select count(*) from cut_held c join pgjob.all_jobs j using (id)
	where j.lease_token > c.lease_token")
refused=$(($(count_h2 "lease lost") - lost_before))
stopped_tasks=$(count_h2 'stopped (lease lost)')
deadline_stops=$(count_h2 'lease not renewed by its deadline')
reconnected=$(count_h2 'connected again')
parts_after=$(parts_by_host)
note "taken over $taken_over of $held; late ends refused $refused; task commands stopped $stopped_tasks; handlers stopped at their deadline $deadline_stops; reconnections $reconnected; partitions after $parts_after"
[ "$taken_over" -eq 0 ] || [ "$refused" -gt 0 ] ||
	fail "$taken_over jobs of $cut_host taken over, yet no 'lease lost' in its logs"
[ "$reconnected" -gt 0 ] || fail "$cut_host's workers never logged 'connected again'"
# A slow job that the cut host held and did not finish was stopped by its
# worker at the lease's deadline, on the worker's own clock.
load_ledgers
unfinished=$(qr "select c.id from cut_held c where c.kind = 'execslow' and not
	exists (select from ledger_exec l where l.job_id = c.id
	and l.token = c.lease_token)")
for id in $unfinished; do
	count_h2 "job=$id .*lease not renewed by its deadline" | grep -qv '^0$' ||
		fail "$cut_host did not stop the handler of job $id at its deadline"
done

# ---------------------------------------------------------------------
# 3. Failover in the middle of the third batch.

enqueue "$njobs"
third=$((total - njobs / 2))
wait_for 120 "half of the third batch" \
	"select count(*) >= $third from pgjob.all_jobs where state = 'done'"
note "failover: crash n1, promote n2"
fo_at=$(date +%s%N)
ip netns exec "${NS[db]}" bash "$src/tests/fault/cluster.sh" crash "$cdir" n1
ip netns exec "${NS[db]}" bash "$src/tests/fault/cluster.sh" promote "$cdir" n2
promoted=$(qr "select now()")
wait_for 120 "a job ended on the new primary" \
	"select count(*) > 0 from pgjob.all_jobs where finished_at > '$promoted'"
fo_ms=$((($(date +%s%N) - fo_at) / 1000000))
wait_for 180 "the third batch done" "$all_done"
[ "$(qr "select pg_is_in_recovery()")" = f ] || fail "the test's connection is not on a primary"

# A schedule tick: ticks are whole minutes, so wait for one at most.
wait_for 90 "a tick of schedule 'tick'" \
	"select count(*) > 0 from pgjob.all_jobs where unique_key like 'schedule:tick:%'"
wait_for 60 "the tick's job done" "$all_done"
wait_for 60 "all workers live again" "$(live_workers $((ninst * workers)))"

# ---------------------------------------------------------------------
# 4. The checks.

load_ledgers
ticks=$(qr "select count(*) || '/' || count(distinct unique_key) from pgjob.all_jobs
	where unique_key like 'schedule:tick:%'")
case $ticks in
*/0 | 0/*) fail "no tick enqueued" ;;
esac
[ "${ticks%/*}" = "${ticks#*/}" ] || fail "ticks (jobs/distinct) $ticks: a tick enqueued twice"
n_jobs=$(qr "select count(*) from pgjob.all_jobs where unique_key is null")
[ "$n_jobs" -eq "$total" ] || fail "$n_jobs jobs in the table, $total enqueued"
lost=$(qr "select count(*) from pgjob.all_jobs where state <> 'done'")
[ "$lost" -eq 0 ] || fail "$lost jobs not done: $(qr "select string_agg(id || ' ' || kind
	|| ' ' || state || ' ' || coalesce(last_error, ''), '; ') from
	(select * from pgjob.all_jobs where state <> 'done' order by id limit 5) x")"
bad=$(qr "select count(*) from pgjob.all_jobs j where kind = 'sqlj' and
	(select count(*) from ledger_sql l where l.job_id = j.id
	and l.token = j.lease_token) <> 1
	or (select count(*) from ledger_sql l where l.job_id = j.id) <> 1
	and kind = 'sqlj'")
[ "$bad" -eq 0 ] || fail "sql ledger: $bad sql jobs without exactly one row, under the final token"
bad=$(qr "select count(*) from pgjob.all_jobs j where kind in ('execj', 'execslow')
	and not exists (select from ledger_exec l where l.job_id = j.id
	and l.token = j.lease_token)")
[ "$bad" -eq 0 ] || fail "exec ledger: $bad exec jobs without a line of their final run"
bad=$(qr "select count(*) from (select job_id, token from ledger_exec
	group by 1, 2 having count(*) > 1) x")
[ "$bad" -eq 0 ] || fail "exec ledger: $bad tokens with two runs"
bad=$(qr "select count(*) from ledger_exec l join pgjob.all_jobs j on j.id = l.job_id
	where l.token > j.lease_token")
[ "$bad" -eq 0 ] || fail "exec ledger: $bad lines with a token above the job's final one"
bad=$(qr "select count(*) from pgjob.all_jobs j where kind = 'httpj' and not exists
	(select from ledger_http l where l.job_id = j.id)")
[ "$bad" -eq 0 ] || fail "http ledger: $bad http jobs never received"

# A second run of a job is allowed only where the first one lost its lease:
# on the cut host, or where its worker's log says so for that job.
dup_exec=$(qr "select count(*) from ledger_exec l join pgjob.all_jobs j on
	j.id = l.job_id where l.token < j.lease_token")
dup_http=$(qr "select coalesce(sum(n - 1), 0) from (select job_id, count(*) n
	from ledger_http group by 1) x")
suspects=$(qr "select distinct l.job_id || ' ' || l.host from ledger_exec l
	join pgjob.all_jobs j on j.id = l.job_id where l.token < j.lease_token
	and l.host <> '$cut_host'
	union select distinct job_id || ' ' || addr from ledger_http
	where job_id in (select job_id from ledger_http group by 1
	having count(*) > 1) and addr <> '${ADDR[$cut_host]}'
	and job_id not in (select job_id from ledger_http
	where addr = '${ADDR[$cut_host]}')")
while read -r id where; do
	[ -n "$id" ] || continue
	grep -q "job=$id .*\(lease lost\|lease not renewed\|giving up writing its end\)" \
		"$dir"/i*.log || fail "job $id ran twice, and its earlier run ($where) did not lose its lease"
done <<<"$suspects"

# The database's clock alone.
off() {
	local first
	first=$(grep -o -m1 'ts=[0-9T:-]*' "$dir/i$1.log" | cut -c4-)
	[ -n "$first" ] || { echo 0; return; }
	echo $(($(date -u -d "$first" +%s) - t0))
}
offsets="$(off 0),$(off 2),$(off 4)"
bad=$(qr "select count(*) from pgjob.workers where abs(extract(epoch from
	heartbeat_at - now())) > 600 or abs(extract(epoch from started_at - now())) > 3000")
[ "$bad" -eq 0 ] || fail "$bad worker rows carry a host's time"
bad=$(qr "select count(*) from pgjob.all_jobs where finished_at > now()
	or finished_at < now() - interval '30 minutes'")
[ "$bad" -eq 0 ] || fail "$bad jobs carry a finish time off the database's clock"
awk -v m="$max_lease" -v l="$lease_s" 'BEGIN { exit !(m <= l + 1) }' ||
	fail "a lease ran $max_lease s from the database's now()"
if [ -n "$ftlib" ]; then
	o2=$(off 2) o4=$(off 4)
	[ "$o2" -lt -3000 ] && [ "$o4" -gt 3000 ] ||
		fail "faketime did not shift h2's and h3's clocks (offsets $offsets s)"
fi

# Every instance stops cleanly, and nothing is left in the hosts.
for i in $(seq 0 $((ninst - 1))); do
	kill -TERM "${SUP[$i]}"
done
for i in $(seq 0 $((ninst - 1))); do
	st=0
	wait "${SUP[$i]}" || st=$?
	[ "$st" -eq 0 ] || fail "instance i$i exited with $st on SIGTERM, want 0"
	SUP[i]=
done
left=
for h in "${hosts[@]}"; do
	for _ in $(seq 1 60); do
		left=$(ip netns pids "${NS[$h]}")
		[ -z "$left" ] && break
		sleep 0.25
	done
	[ -z "$left" ] || fail "processes left on $h after the stop: $(ps -o pid=,args= -p "$(paste -sd, <<<"$left")" | head -5)"
done

wall=$(($(date +%s) - begin))
echo "scenario=netns hosts=3 instances=$ninst workers=$n jobs=$total lost=$lost" \
	"runs_per_host=$spread slots=$slots ticks=$ticks" \
	"partitions=$parts_before/$parts_cut/$parts_after cut_held=$held" \
	"taken_over=$taken_over takeover_ms=$takeover_ms cut_ms=$cut_ms" \
	"late_ends_refused=$refused task_commands_stopped=$stopped_tasks" \
	"deadline_stops=$deadline_stops failover_recovery_ms=$fo_ms" \
	"duplicate_runs=$dup_exec+$dup_http clock_offsets_s=$offsets" \
	"max_lease_from_db_now_s=$max_lease wall_s=$wall"
[ "$fails" -eq 0 ] || die "$fails invariants broken"
