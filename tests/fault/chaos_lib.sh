# shellcheck shell=bash
# shellcheck disable=SC2154 # root, bin, dir, ninst, nworkers: the caller's
# The pieces of the chaos runs on the newer features (docs/faults.md#chaos-on-the-features),
# sourced by tests/fault/chaos_features.sh and tests/soak/soak.sh.
#
# The caller sets: root (the source tree), bin (the build folder), dir (a
# scratch folder of its own), ninst and nworkers.  Everything here writes
# under dir: the cluster (cluster.sh) in dir/pg, one config and log per
# instance, the exec ledger (tests/fault/ledger.sh), the events the run
# made (dir/events: faults, console actions and their database times) and
# the samples (dir/samples) that tests/fault/chaos_check.py reads with the
# database afterwards.

# shellcheck source=scripts/testlib.sh
. "$root/scripts/testlib.sh"

lease_s=3
ledger=$dir/exec.ledger
events=$dir/events
samples=$dir/samples
sups=()
web_pid=
web_port=
sampler_pid=
ci=

chaos_log() { echo "[chaos $(date -u +%H:%M:%S)] $*" >&2; }

# psql on the workload's database; -X: no psqlrc.
dbq() { psql -X -q -At -v ON_ERROR_STOP=1 "$ci" "$@"; }

# The database's clock, to the microsecond: the events are compared with
# the times the database wrote (attempted_at, ticks), never with ours.
db_now() {
	local t
	for _ in $(seq 1 100); do
		t=$(dbq -c "select to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')" 2>/dev/null) &&
			[ -n "$t" ] && { echo "$t"; return; }
		sleep 0.2
	done
	echo "chaos: the database does not answer" >&2
	return 1
}

event() { echo "$*" >>"$events"; }

# One server (n1), the database "chaos" with the schema and the tables the
# handlers write: ledger_sql (no unique key: a second run is counted, not
# hidden) and ledger_batch (the batch callbacks).
chaos_setup_db() {
	bash "$root/tests/fault/cluster.sh" single "$dir/pg" "$@" >/dev/null
	local server
	server=$(cat "$dir/pg/conninfo")
	psql -X -q "$server" -c "create database chaos" >/dev/null
	ci="$server dbname=chaos"
	"$bin/pgjob" --database "$ci" migrate >/dev/null
	dbq <<'SQL'
create table ledger_sql (job_id bigint not null, token bigint not null,
	at timestamptz not null default clock_timestamp());
create table ledger_batch (batch_id bigint not null, job_id bigint not null,
	token bigint not null, counts jsonb not null);
create table ledger_wake (job_id bigint not null, at timestamptz not null,
	wake interval not null);
-- Each batch's jobs, written with their enqueue: the soak prunes finished
-- jobs as it runs, and the checker counts a batch's pruned jobs too.
create table batch_members (batch_id bigint not null, job_id bigint not null);
SQL
	: >"$ledger"
	: >"$events"
	: >"$samples"
	# The first run of a failonce job fails (max_attempts 1: it ends
	# dead); once retried (which sets its attempts back to 0) it writes the
	# exec ledger as execj does.  An againj job's first run fails too,
	# retried at once in place (a backoff of 0: docs/daemon.md,
	# "Retries"), then writes the exec ledger.  Each script marks a job's
	# first run in a folder of its own.
	local s
	for s in failonce again; do
		mkdir -p "$dir/$s.first"
		printf '#!/bin/sh\nm=%s/$PGJOB_JOB_ID\n[ -e "$m" ] || { : >"$m"; exit 1; }\nexec /bin/sh %s %s 0.05\n' \
			"$dir/$s.first" "$root/tests/fault/ledger.sh" "$ledger" >"$dir/$s.sh"
	done
}

# The config of instance i.  Queues: default (sql, exec, workflows,
# batches, schedules), gc (global_concurrency 3), rl (a token bucket with
# costs), fq (fair, with weights, global_concurrency 2).
chaos_config() {
	local i=$1 sh="$root/tests/fault/ledger.sh"
	local sqlrow="insert into ledger_sql (job_id, token) select \$2, j.lease_token from pgjob.all_jobs j, pg_sleep(%s) where j.id = \$2 and \$1 is not null"
	local sqlj fqx
	# shellcheck disable=SC2059
	sqlj=$(printf "$sqlrow" 0.05)
	local againsql="insert into ledger_sql (job_id, token) select \$2, j.lease_token from pgjob.all_jobs j, pg_sleep(0.05) where j.id = \$2 and \$1 is not null and 1 / (case when j.attempts - j.lost_attempts = 1 then 0 else 1 end) = 1"
	# shellcheck disable=SC2059
	fqx=$(printf "$sqlrow" 0.05)
	cat >"$dir/i$i.yaml" <<YAML
database:
  conninfo: "$ci"
workers: $nworkers
lease: ${lease_s}s
poll_interval: 250ms
shutdown_timeout: 10s
log: { level: info }
retention: ${chaos_retention:-7d}
defaults: { timeout: 60s, max_attempts: 1000, backoff: { base: 100ms, max: 1s } }
queues:
  default: { concurrency: 4 }
  gc: { concurrency: 4, global_concurrency: 3 }
  rl: { concurrency: 4, rate: 20/s, burst: 5 }
  fq: { concurrency: 4, fair: true, global_concurrency: 2 }
  wake: { concurrency: 2 }
handlers:
  sqlj: { type: sql, statement: "$sqlj" }
  execj: { type: exec, command: ["/bin/sh", "$sh", "$ledger", "0.1"] }
  execslow: { type: exec, command: ["/bin/sh", "$sh", "$ledger", "$((lease_s + 1))"] }
  failonce: { type: exec, command: ["/bin/sh", "$dir/failonce.sh"] }
  # Retries at once, in place: an exec job whose first run fails, and an
  # sql job whose first attempt fails (its ledger row rolled back with it).
  againj: { type: exec, command: ["/bin/sh", "$dir/again.sh"], backoff: { base: 0s, max: 0s } }
  againsql: { type: sql, statement: "$againsql", backoff: { base: 0s, max: 0s } }
  gcx: { type: exec, queue: gc, command: ["/bin/sh", "$sh", "$ledger", "0.5"] }
  rlx: { type: exec, queue: rl, command: ["/bin/sh", "$sh", "$ledger", "0.02"] }
  fqx: { type: sql, queue: fq, statement: "$fqx" }
  batchcb: { type: sql, statement: "insert into ledger_batch (batch_id, job_id, token, counts) select (\$1->'pgjob'->'batch'->>'id')::bigint, \$2, j.lease_token, \$1->'pgjob'->'batch' from pgjob.all_jobs j where j.id = \$2" }
  schedj: { type: sql, statement: "$sqlj" }
  # The soak's wake-up probe: from its enqueue's end (payload t, taken
  # just before the commit) to its handler's start.
  wakej: { type: sql, queue: wake, statement: "insert into ledger_wake select \$2, now(), now() - (\$1->>'t')::timestamptz" }
schedules:
  tick: { cron: "* * * * *", kind: schedj }
  tock: { cron: "* * * * *", kind: schedj }
YAML
}

chaos_start_instance() {
	local i=$1
	# A process group of its own (setsid execs it: $! is pgjobd), so that
	# the cleanup can kill what is left of it without killing us.
	setsid "$bin/pgjobd" -c "$dir/i$i.yaml" >>"$dir/i$i.log" 2>&1 &
	sups[$i]=$!
}

chaos_start_all() {
	local i
	for ((i = 0; i < ninst; i++)); do
		chaos_config "$i"
		chaos_start_instance "$i"
	done
	# Every worker connected: its queues and limits are published.
	for _ in $(seq 1 600); do
		[ "$(dbq -c "select count(*) from pgjob.workers where heartbeat_at > now() - interval '10 seconds'" 2>/dev/null)" = "$((ninst * nworkers))" ] && return 0
		sleep 0.1
	done
	echo "chaos: the workers did not all connect" >&2
	return 1
}

# The console (pgjob web), open on loopback, and a session of it.
chaos_start_web() {
	web_port=$(free_port chaos)
	"$bin/pgjob" --database "$ci" web --listen "127.0.0.1:$web_port" >>"$dir/web.log" 2>&1 &
	web_pid=$!
	for _ in $(seq 1 300); do
		curl -sf -c "$dir/web.cookies" "http://127.0.0.1:$web_port/api/session" >"$dir/web.session" 2>/dev/null && break
		sleep 0.1
	done
	jq -er .csrf "$dir/web.session" >"$dir/web.csrf"
}

# api PATH JSON: a POST to the console; retried while the database
# restarts (the console answers 5xx then).  Prints the answer.
api() {
	local out
	for _ in $(seq 1 150); do
		if out=$(curl -sf -b "$dir/web.cookies" -H "X-CSRF-Token: $(cat "$dir/web.csrf")" \
			-H "Content-Type: application/json" -H "Origin: http://127.0.0.1:$web_port" \
			--data "$2" "http://127.0.0.1:$web_port/api/$1" 2>/dev/null); then
			echo "$out"
			return 0
		fi
		sleep 0.2
	done
	echo "chaos: POST /api/$1 $2 never succeeded" >&2
	return 1
}

# The sampler: every 200 ms, what runs in the limited queues under a lease
# that holds, the lease tokens of running jobs, and the tokens of the
# cluster's leases (scheduler, pruning...).  A sample that fails (the
# server restarting) is skipped.
chaos_sampler() {
	local n=0
	while :; do
		n=$((n + 1))
		dbq -F ' ' >>"$samples" 2>/dev/null <<SQL || true
select 'Q', $n, q.queue, count(j.id), coalesce(bool_or(l.paused), false)
  from (values ('gc'), ('fq'), ('rl')) q(queue)
  left join pgjob.jobs j on j.queue = q.queue and j.state = 'running' and j.locked_until > now()
  left join pgjob.limits l on l.queue = q.queue
 group by q.queue;
select 'T', $n, id, lease_token from pgjob.jobs where state = 'running';
select 'L', $n, name, token from pgjob.leases;
SQL
		sleep 0.2
	done
}

chaos_start_sampler() {
	chaos_sampler &
	sampler_pid=$!
}

# Workers that are connected: a row in pgjob.workers, a live pgjobd
# process whose parent is a pgjobd (its supervisor).  From the database and
# /proc, so that the nemesis (a process of its own) sees supervisors
# started again after it forked.
all_registered_workers() {
	local p pp
	dbq -c "select pid from pgjob.workers" 2>/dev/null | while read -r p; do
		pp=$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')
		[ -n "$pp" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = pgjobd ] &&
			[ "$(cat "/proc/$pp/comm" 2>/dev/null)" = pgjobd ] && echo "$p"
	done
	return 0
}

pick() { shuf -n 1; }

# The faults.  Each writes an event line the checker reads: the pids of
# workers killed or stopped (their runs may be lost), the slots stopped
# and when (a stopped worker's late end is allowed to overrun a limit).
fault_kill_worker() {
	local v
	v=$(all_registered_workers | pick)
	[ -n "$v" ] || return 0
	# The handlers it runs die with it (the supervisor kills their groups).
	event "faulted $v kill9"
	kill -KILL "$v" 2>/dev/null || true
	chaos_log "kill -9 worker $v"
}

fault_kill_supervisor() {
	local i=$((RANDOM % ninst)) w
	for w in $(ps -o pid= --ppid "${sups[$i]}"); do event "faulted $w kill9sup"; done
	kill -KILL "${sups[$i]}" 2>/dev/null || true
	wait "${sups[$i]}" 2>/dev/null || true
	chaos_log "kill -9 supervisor ${sups[$i]} (instance i$i), started again"
	sleep 0.$((RANDOM % 9 + 1))
	chaos_start_instance "$i"
}

# The nemesis: a process of its own (the run's timed actions may be slow
# on a loaded machine, and must not slow it down) that kills a worker or
# ends a session, in turn, every 1.5 s until dir/nemesis.stop exists; a
# kill only while at least half of the workers are connected (the
# supervisor restarts a crashing worker after 1, 2, 4 ... s: a fleet
# killed faster than that has no capacity left).
chaos_nemesis() {
	local k=0
	rm -f "$dir/nemesis.stop"
	(
		while sleep 1.5 && [ ! -e "$dir/nemesis.stop" ]; do
			[ -e "$dir/nemesis.hold" ] && continue
			if [ $((k % 2)) = 0 ] && [ "$(all_registered_workers | wc -l)" -ge $((ninst * nworkers / 2)) ]; then
				fault_kill_worker
			else
				fault_conn_reset
			fi
			k=$((k + 1))
		done
	) &
	nemesis_pid=$!
}

chaos_nemesis_stop() {
	[ -n "${nemesis_pid:-}" ] || return 0
	: >"$dir/nemesis.stop"
	wait "$nemesis_pid" 2>/dev/null || true
	nemesis_pid=
}

# SIGSTOP of a worker, for the lease + 2.5 s (in the background: the
# caller goes on), then SIGCONT.
fault_sigstop() {
	local row v slot
	# A worker holding an exec job if there is one, else one holding any
	# job, else any.
	# (A worker that died keeps its row: only live ones.)
	local live
	live=$(all_registered_workers | paste -sd, -)
	[ -n "$live" ] || return 0
	row=$(dbq -F ' ' -c "select w.pid, w.host || ':' || w.slot from pgjob.workers w left join pgjob.jobs j on j.locked_by = w.host || ':' || w.slot and j.state = 'running' where w.pid in ($live) group by 1, 2 order by bool_or(j.kind in ('execj', 'execslow', 'gcx', 'rlx')) desc nulls last, count(j.id) desc, random() limit 1" 2>/dev/null) || return 0
	read -r v slot <<<"$row"
	[ -n "$v" ] || return 0
	kill -STOP "$v" 2>/dev/null || return 0
	event "faulted $v sigstop"
	event "stopped $slot $(db_now) $v"
	chaos_log "SIGSTOP worker $v ($slot)"
	(
		sleep "$lease_s.5"
		sleep 2
		kill -CONT "$v" 2>/dev/null
		echo "continued $slot $(db_now) $v" >>"$events"
	) &
}

# The recovery, as the fault suite's pgrestart measures it: until every
# worker connected before the restart is connected again and a job has
# ended since (a probe enqueued once the server is back: the queues may
# have run dry meanwhile).  The nemesis holds off meanwhile: a worker it
# killed may wait out the supervisor's backoff (up to 60 s), which is not
# the restart's.
fault_pg_restart() {
	local t0 probe='' n=f before since alive p
	: >"$dir/nemesis.hold"
	before=$(all_registered_workers | paste -sd, -)
	since=$(db_now)
	chaos_log "restarting PostgreSQL (-m immediate), workers $before connected"
	t0=$(date +%s%N)
	bash "$root/tests/fault/cluster.sh" restart "$dir/pg" n1
	for _ in $(seq 1 600); do
		[ -n "$probe" ] || probe=$(dbq -c "select pgjob.enqueue('sqlj', '{\"probe\": true}', priority => -100)" 2>/dev/null) || true
		# Those of them still alive: each has written its row since.
		alive=0
		for p in ${before//,/ }; do [ -d "/proc/$p" ] && alive=$((alive + 1)); done
		[ -n "$probe" ] && n=$(dbq -c "select (select count(*) from pgjob.workers where pid in (${before:-0}) and heartbeat_at > '$since') >= $alive and exists (select from pgjob.all_jobs where id = $probe and state = 'done')" 2>/dev/null) || true
		[ "$n" = t ] && break
		sleep 0.1
	done
	[ -z "$probe" ] || echo "J|$probe" >>"$dir/enqueued"
	rm -f "$dir/nemesis.hold"
	if [ "$n" = t ]; then
		event "pgrestart $((($(date +%s%N) - t0) / 1000000))"
	else
		event "pgrestart -1"
	fi
}

# A connection reset: the server ends one pgjobd session.
fault_conn_reset() {
	local p
	p=$(dbq -c "select pid from pg_stat_activity where application_name = 'pgjobd' and datname = current_database() order by random() limit 1" 2>/dev/null) || return 0
	[ -n "$p" ] || return 0
	dbq -c "select pg_terminate_backend($p)" >/dev/null 2>&1 || true
	event "connreset $p"
	chaos_log "pg_terminate_backend($p)"
}

# The workload's SQL: N scales what is not limited (N=1: the short form);
# the limited queues get what their limits let run in about a cycle.
#  - default: 100N sqlj, 100N execj, 2N execslow;
#  - gc: 40 gcx; rl: 120 rlx of cost 1 to 3; fq: 36 under key heavy
#    (weight 3, set by chaos_weights), 24 under light, and 3 each under
#    s1..s4;
#  - workflows (wave 1 and 2 alike): 2N fan-outs/fan-ins (a -> b1..b3 ->
#    c, a and c sql, b exec) and 2N failure workflows (p, a failonce
#    step of max_attempts 1, with children cancel, run and wait);
#  - batches: opened by chaos_batches_open, joined while running.
# The ids of the jobs (J id) and workflows (W id) go to dir/enqueued: an
# id printed is a commit acknowledged, which the checker looks for.
chaos_enqueue_base() {
	local n=$1
	dbq >>"$dir/enqueued" <<SQL
select 'J', pgjob.enqueue(case when i % 2 = 0 then 'sqlj' else 'execj' end, jsonb_build_object('i', i))
  from generate_series(1, 200 * $n) i;
select 'J', pgjob.enqueue('execslow', jsonb_build_object('i', i)) from generate_series(1, 2 * $n) i;
select 'J', pgjob.enqueue(case when i % 2 = 0 then 'againj' else 'againsql' end, jsonb_build_object('i', i))
  from generate_series(1, 20 * $n) i;
select 'J', pgjob.enqueue('gcx', jsonb_build_object('i', i), queue => 'gc') from generate_series(1, 40) i;
select 'J', pgjob.enqueue('rlx', jsonb_build_object('i', i), queue => 'rl', cost => 1 + i % 3)
  from generate_series(1, 120) i;
select 'J', pgjob.enqueue('fqx', jsonb_build_object('i', i), queue => 'fq',
		     limit_key => case when i <= 36 then 'heavy' else 'light' end)
  from generate_series(1, 60) i;
select 'J', pgjob.enqueue('fqx', jsonb_build_object('i', i), queue => 'fq', limit_key => 's' || (i % 4 + 1))
  from generate_series(1, 12) i;
SQL
}

chaos_weights() { dbq -c "select pgjob.set_key_weight('fq', 'heavy', 3)" >/dev/null; }

chaos_enqueue_workflows() {
	local n=$1 wave=$2
	dbq <<SQL >>"$dir/enqueued"
select 'W', pgjob.enqueue_workflow(jsonb_build_object('name', 'fan $wave ' || i, 'steps', '[
  {"name": "a", "kind": "sqlj"},
  {"name": "b1", "kind": "execj", "after": ["a"]},
  {"name": "b2", "kind": "execj", "after": ["a"]},
  {"name": "b3", "kind": "execj", "after": ["a"]},
  {"name": "c", "kind": "sqlj", "after": ["b1", "b2", "b3"]}]'::jsonb))
  from generate_series(1, 2 * $n) i;
select 'W', pgjob.enqueue_workflow(jsonb_build_object('name', 'fail $wave ' || i, 'steps', '[
  {"name": "ok", "kind": "sqlj"},
  {"name": "p", "kind": "failonce", "max_attempts": 1},
  {"name": "cc", "kind": "sqlj", "after": ["ok", "p"], "on_parent_failure": "cancel"},
  {"name": "cr", "kind": "sqlj", "after": ["ok", "p"], "on_parent_failure": "run"},
  {"name": "cw", "kind": "sqlj", "after": ["ok", "p"], "on_parent_failure": "wait"}]'::jsonb))
  from generate_series(1, 2 * $n) i;
SQL
}

# Two batches of 15N sqlj jobs each, open (not sealed), ahead of the
# backlog (priority -10), so that they run before others join them.
chaos_batches_open() {
	local n=$1
	dbq >>"$dir/enqueued" <<SQL
with b as (select k, pgjob.batch_open('batchcb', '{}', name => 'chaos ' || k) as id
	     from generate_series(1, 2) k),
     e as (select b.id as bid, pgjob.enqueue('sqlj', jsonb_build_object('batch', b.k, 'i', i),
				   batch_id => b.id, priority => -10) as jid
	     from b, generate_series(1, 15 * $n) i),
     m as (insert into batch_members select bid, jid from e)
select 'J', jid from e;
SQL
}

# More jobs join each open batch while its first ones run; then the seal.
chaos_batches_join() {
	local n=$1
	# Those of the batches that ran jobs already: joined while running.
	event "batches_joined $(dbq -c "select count(*) from pgjob.batches b where not b.sealed and b.done > 0")"
	dbq -c "with e as (select b.id as bid, pgjob.enqueue('sqlj', jsonb_build_object('joined', b.id, 'i', i), batch_id => b.id) as jid from pgjob.batches b, generate_series(1, 15 * $n) i where not b.sealed), m as (insert into batch_members select bid, jid from e) select 'J', jid from e" >>"$dir/enqueued"
}

chaos_batches_seal() {
	dbq -c "select pgjob.batch_seal(id) from pgjob.batches where not sealed" >/dev/null
}

# A trickle of a few jobs into every queue (one statement): work for the
# faults to hit all along.
chaos_trickle() {
	local k=$1
	dbq -c "select 'J', pgjob.enqueue(kind, jsonb_build_object('trickle', $k), queue => q, limit_key => lk, cost => c)
		  from (values ('sqlj', 'default', null, 1), ('execj', 'default', null, 1),
			       ('gcx', 'gc', null, 1), ('rlx', 'rl', null, 1 + $k % 3),
			       ('fqx', 'fq', case when $k % 2 = 0 then 'heavy' else 'light' end, 1)) v(kind, q, lk, c)" \
		>>"$dir/enqueued" 2>/dev/null || true
}

# Console actions, each with the database's time before and after.
console_pause() {
	api queues/pause "{\"queue\": \"$1\"}" >/dev/null
	event "paused $1 $(db_now)"
}

console_resume() {
	event "resuming $1 $(db_now)"
	api queues/resume "{\"queue\": \"$1\"}" >/dev/null
}

console_disable() {
	api schedules/enable "{\"name\": \"$1\", \"enabled\": false}" >/dev/null
	event "disabled $1 $(db_now)"
}

console_enable() {
	event "enabling $1 $(db_now)"
	api schedules/enable "{\"name\": \"$1\", \"enabled\": true}" >/dev/null
}

console_run() {
	api schedules/run "{\"name\": \"$1\"}" >/dev/null
	event "run_requested $1"
}

# Bulk retry from the console of every dead failonce step, by a filter
# with its expected count (a count that moved meanwhile is asked again).
console_retry_dead() {
	local n out
	n=$(dbq -c "select count(*) from pgjob.jobs where state = 'dead' and kind = 'failonce'" 2>/dev/null) || return 0
	[ "${n:-0}" -gt 0 ] || return 0
	out=$(api jobs/retry "{\"filter\": {\"state\": \"dead\", \"kind\": \"failonce\"}, \"expect\": $n}" 2>/dev/null) || return 0
	event "bulk_retry $(jq -r .affected <<<"$out")"
	chaos_log "console: retried $(jq -r .affected <<<"$out") dead failonce steps"
}

# Done: nothing unfinished, every batch's callback ended, every run asked
# of a schedule served.
chaos_settled() {
	[ "$(dbq -c "select (select count(*) from pgjob.jobs where finished_at is null or state = 'dead')
		+ (select count(*) from pgjob.batches where finished_at is null)
		+ (select count(*) from pgjob.schedules where run_requested_at is not null)" 2>/dev/null)" = 0 ]
}

chaos_stop() {
	local i st rc=0
	[ -n "$sampler_pid" ] && { kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null; sampler_pid=; }
	[ -n "$web_pid" ] && { kill -TERM "$web_pid" 2>/dev/null; wait "$web_pid" 2>/dev/null; web_pid=; }
	for ((i = 0; i < ninst; i++)); do
		[ -n "${sups[$i]:-}" ] || continue
		kill -CONT -- "-${sups[$i]}" 2>/dev/null
		kill -TERM "${sups[$i]}" 2>/dev/null
		st=0
		wait "${sups[$i]}" || st=$?
		if [ "$st" != 0 ]; then
			echo "chaos: instance i$i exited $st on SIGTERM (want 0)" >&2
			rc=1
		fi
		sups[$i]=
	done
	return $rc
}

chaos_cleanup() {
	local i
	[ -n "${nemesis_pid:-}" ] && { : >"$dir/nemesis.stop"; kill "$nemesis_pid" 2>/dev/null; }
	[ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
	[ -n "$web_pid" ] && kill -KILL "$web_pid" 2>/dev/null
	for ((i = 0; i < ninst; i++)); do
		[ -n "${sups[$i]:-}" ] && kill -KILL -- "-${sups[$i]}" "${sups[$i]}" 2>/dev/null
	done
	bash "$root/tests/fault/cluster.sh" stop "$dir/pg" >/dev/null 2>&1 || true
}
