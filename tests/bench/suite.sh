#!/usr/bin/env bash
# The benchmark suite (docs/performance.md), one command:
#
#   tests/bench/suite.sh            full form, about 17 minutes on 2 cores
#   tests/bench/suite.sh --short    seconds: what CI runs, so it cannot rot
#
# It starts its own PostgreSQL at default durability (fsync and
# synchronous_commit on, pg_stat_statements loaded), queues no-op jobs with
# generate_series, runs pgjobd on them, and prints one table:
#
#   - the SQL-only ceiling: pgbench running the seed design's naive claim and
#     finish statements (tests/bench/ceiling), batches of 100, 4 clients,
#     update on finish and delete on finish;
#   - pgjobd with the bench plugin, retention 7d (done jobs kept) and
#     retention 0 (done jobs deleted), median, min and max of RUNS runs;
#   - /bin/true through the exec handler against the plugin, same config;
#   - no-op jobs through process handlers (docs/handlers.md) in Python
#     (a coroutine), Node and Ruby, one copy a worker holding the same
#     concurrency, against the same plugin row;
#   - a backlog of BACKLOG jobs, and a run while another session holds an
#     old snapshot open (vacuum can remove nothing), against the first row;
#   - the web console open but idle, and busy (four pages refreshed every
#     second), beside a drain; every job failing its first attempt (the
#     attempt history written);
#   - 16 instances of 1 worker, 4 of 4 and 1 instance of 16 workers;
#
# and then the wake-up latency (one idle worker, single enqueues), the
# latency under load (single enqueues into an idle queue while 10,000
# jobs/s flow through another), the RSS of the supervisor and a worker at
# rest before and after the backlog, and the claim statement's figures from
# pg_stat_statements per scale run.
#
# Figures: jobs/s from the first job seen running to none left (the
# watcher polls every 20 ms with two index probes); statements/job are the
# transactions the server committed during the run, less the watcher's,
# per job (each of pgjobd's statements is one transaction, and pipelining
# can put several in one round trip, so this bounds round trips from
# above); WAL B/job is the WAL written from start to stop, checkpoints and
# autovacuum included; dead tuples are pg_stat_user_tables.n_dead_tup of
# the jobs table, the largest seen during the run.
#
# Options: --short, --runs N, --jobs N, --workers W, --concurrency C
# (per worker), --backlog N.  PGJOBD_BUILD_DIR picks the build folder.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
# Debian's interpreter, not whatever shim PATH puts first.
py=$(command -v /usr/bin/python3 || command -v python3)

# settle: seconds for a run's last statements to reach pg_stat_database
# before and after it (its statements/job); --short's figures are a smoke
# test, so it waits less (35 runs, two waits each).
settle=0.5
short=0 runs=3 n=200000 workers=2 conc=1000 backlog=1000000
lat_count=200 lat_ms=20 load_rate=10000 load_s=30 fresh_s=60 exec_n=20000 exec_conc=50 fan=10000 chain=1000
while [ $# -gt 0 ]; do
	case $1 in
	--short) short=1 settle=0.1 runs=1 n=5000 backlog=20000 lat_count=20 load_s=4 fresh_s=5 exec_n=500 fan=200 chain=50 ;;
	--runs) runs=$2; shift ;;
	--jobs) n=$2; shift ;;
	--workers) workers=$2; shift ;;
	--concurrency) conc=$2; shift ;;
	--backlog) backlog=$2; shift ;;
	*) echo "usage: suite.sh [--short] [--runs N] [--jobs N] [--workers W] [--concurrency C] [--backlog N]" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j"$(nproc)" --target pgjobd pgjob pgjobd_bench \
	pgjobd_bench_tool >/dev/null
dir="$build/bench-suite"
PGJOBD_TESTPG_DURABLE=1 \
	PGJOBD_TESTPG_OPTS="-c shared_preload_libraries=pg_stat_statements" \
	bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
holder=
# pg_sleep never notices that its client went away: end the session.
release_snapshot() {
	sql -c "select pg_terminate_backend(pid) from pg_stat_activity where query like 'select pg_sleep(3600)%'" >/dev/null
}
cleanup() {
	[ -n "$holder" ] && release_snapshot
	pkill -TERM -f -- "-c $dir/" 2>/dev/null || true
	# The logs outlive the server: $build/bench-suite.logs.
	mkdir -p "$dir.logs"
	cp "$dir/pgjobd.log" "$dir.logs/" 2>/dev/null || true
	cp "$(cat "$dir/tmpdata" 2>/dev/null || echo "$dir/data")/server.log" "$dir.logs/" 2>/dev/null || true
	bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
}
trap cleanup EXIT
db=$(cat "$dir/conninfo")
tool="$build/pgjobd_bench_tool"
results="$dir/results.tsv"
: >"$results"
: >"$dir/pgjobd.log"

sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" "$@"; }
sql -c "create extension if not exists pg_stat_statements"

# name median min max statements/job wal/job dead [note]: one row
row() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" \
		"$7" "${8:-}" >>"$results"
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

xacts() { sql -c "select xact_commit + xact_rollback from pg_stat_database where datname = current_database()"; }
lsn() { sql -c "select pg_current_wal_lsn()"; }

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

fresh_schema() {
	sql -c "drop schema if exists pgjob cascade" 2>/dev/null
	"$build/pgjob" -d "$db" migrate >/dev/null
}

enqueue() { # count kind (enq_keys=K: each job one of K limit keys; enq_tp=1: each in a trace of its own)
	local key=null tp=null
	if [ -n "${enq_keys:-}" ]; then key="'k' || (i % $enq_keys)"; fi
	if [ -n "${enq_tp:-}" ]; then tp="'00-' || md5(i::text) || '-' || left(md5('p' || i), 16) || '-01'"; fi
	sql -c "insert into pgjob.jobs (kind, payload, limit_key, traceparent) select '$2', jsonb_build_object('id', i), $key, $tp from generate_series(1, $1) i" \
		-c "vacuum analyze pgjob.jobs" -c "checkpoint"
}

config() { # file workers concurrency retention [flow-control settings]
	cat >"$1" <<YAML
workers: $2
log: { level: warn }
retention: $4
queues: { default: { concurrency: $3${5:+, $5} } }
handlers:
  noop: { type: plugin, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench }
  true: { type: exec, command: ["/bin/true"] }
  noop_async:
    type: process
    command: ["$py", "$root/tests/bench/noop_process.py"]
    env: ["PYTHONPATH=$root/clients/python"]
    concurrency: $3
  noop_js:
    type: process
    command: ["node", "$root/tests/bench/noop_process.js"]
    env: ["PGJOBD_CLIENT=$root/clients/node/pgjobd-handler.js"]
    concurrency: $3
  noop_rb:
    type: process
    command: ["ruby", "$root/tests/bench/noop_process.rb"]
    env: ["PGJOBD_CLIENT=$root/clients/ruby/pgjobd_handler.rb"]
    concurrency: $3
${cfg_extra:-}
YAML
}

start_instances() { # count config: sets $pids
	pids=
	for _ in $(seq "$1"); do
		"$build/pgjobd" -c "$2" -d "$db" 2>>"$dir/pgjobd.log" &
		pids="$pids $!"
	done
}

stop_instances() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
}

# One drain: jobs already queued, instances started, watched to the end.
# Prints "rate stmts_per_job wal_per_job max_dead" and writes the RSS of
# the first supervisor and its first worker (KiB, at rest once the queue is
# empty) to $dir/rss.
drain() { # jobs instances config
	local x0 l0 out first end dead polls x1 l1
	sleep "$settle" # the last statements' counters reach pg_stat_database
	x0=$(xacts)
	l0=$(lsn)
	# The watch first, the daemons once it has polled (bench_tool.c).
	rm -f "$dir/ready"
	PGJOBD_BENCH_READY="$dir/ready" "$tool" wait "$db" 600 >"$dir/wait.out" &
	local watch=$!
	until [ -e "$dir/ready" ] || ! kill -0 "$watch" 2>/dev/null; do sleep 0.01; done
	start_instances "$2" "$3"
	wait "$watch"
	out=$(cat "$dir/wait.out")
	read -r first end dead polls <<<"$(sed 's/[a-z_]*=//g' <<<"$out")"
	local p1
	p1=$(awk '{print $1}' <<<"$pids")
	echo "$(rss_kb "$p1") $(rss_kb "$(pgrep -P "$p1" | head -1)")" >"$dir/rss"
	stop_instances
	sleep "$settle"
	x1=$(xacts)
	l1=$(sql -c "select pg_wal_lsn_diff(pg_current_wal_lsn(), '$l0')")
	awk -v n="$1" -v f="$first" -v e="$end" -v x="$((x1 - x0 - polls))" \
		-v w="$l1" -v d="$dead" 'BEGIN {
		s = (e - f) / 1e6; if (s <= 0) s = 0.001
		printf "%.0f %.3f %.0f %d\n", n / s, x / n, w / n, d }'
}

# RUNS drains of N jobs with this config; one row, median (min-max).
series() { # name retention workers concurrency jobs kind instances [limits]
	local rates="" stmts="" wals="" deads="" r a b c d
	config "$dir/run.yaml" "$3" "$4" "$2" "${8:-}"
	for r in $(seq "$runs"); do
		fresh_schema
		enqueue "$5" "$6"
		read -r a b c d <<<"$(drain "$5" "${7:-1}" "$dir/run.yaml")"
		rates="$rates $a" stmts="$stmts $b" wals="$wals $c" deads="$deads $d"
	done
	local med min max
	med=$(tr ' ' '\n' <<<"$rates" | grep . | median)
	min=$(tr ' ' '\n' <<<"$rates" | grep . | sort -n | head -1)
	max=$(tr ' ' '\n' <<<"$rates" | grep . | sort -n | tail -1)
	row "$1" "$med" "$min" "$max" "$(tr ' ' '\n' <<<"$stmts" | grep . | median)" \
		"$(tr ' ' '\n' <<<"$wals" | grep . | median)" \
		"$(tr ' ' '\n' <<<"$deads" | grep . | sort -n | tail -1)"
	echo "$med"
}

ceiling() { # mode
	local rates="" r out tps processed left
	for r in $(seq "$runs"); do
		sql -f "$root/tests/bench/ceiling/schema.sql" 2>/dev/null
		sql -c "insert into ceiling.jobs (kind, payload) select 'noop', jsonb_build_object('id', i) from generate_series(1, $n) i" \
			-c "vacuum analyze ceiling.jobs" -c "checkpoint"
		local x0 l0
		x0=$(xacts)
		l0=$(lsn)
		out=$(pgbench -n -M prepared -c 4 -j 4 -t $((n / 400 + 1)) \
			-f "$root/tests/bench/ceiling/claim_$1.sql" "$db" 2>&1)
		tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
		processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
		left=$(sql -c "select count(*) from ceiling.jobs where done_at is null")
		# Jobs per transaction pair times pairs per second.
		rates="$rates $(awk -v n="$n" -v l="$left" -v t="$tps" -v p="$processed" \
			'BEGIN {printf "%.0f", (n - l) * t / p}')"
		sleep "$settle"
		last_stmts=$(awk -v x="$(($(xacts) - x0))" -v n="$n" 'BEGIN {printf "%.3f", x / n}')
		last_wal=$(sql -c "select round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$l0') / $n)")
		last_dead=$(sql -c "select n_dead_tup from pg_stat_user_tables where relid = 'ceiling.jobs'::regclass")
	done
	local med
	med=$(tr ' ' '\n' <<<"$rates" | grep . | median)
	row "SQL-only ceiling, $1 on finish (pgbench, batches of 100, 4 clients)" \
		"$med" "$(tr ' ' '\n' <<<"$rates" | grep . | sort -n | head -1)" \
		"$(tr ' ' '\n' <<<"$rates" | grep . | sort -n | tail -1)" \
		"$last_stmts" "$last_wal" "$last_dead"
	echo "$med"
	sql -c "drop schema ceiling cascade"
}

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo);" \
	"$(sql -c 'select version()' | cut -d, -f1); jobs=$n runs=$runs workers=$workers concurrency=$conc" >&2

ceil_update=$(ceiling update)
ceiling delete >/dev/null
sql -c "select pg_stat_statements_reset()" >/dev/null
base_keep=$(series "pgjobd, plugin, retention 7d (workers $workers, concurrency $conc)" 7d "$workers" "$conc" "$n" noop)
# The history per queue and kind (docs/operations.md) is always on: each
# worker writes it at its heartbeat, not per job.  Its writes during the
# runs above go in the row's note, to show they do not grow with the jobs.
sed -i "\$ s|\$|history: $(sql -c "select format('%s writes for %s jobs, %s rows each, %s ms mean', calls, $n * $runs, round(rows::numeric / greatest(calls, 1), 1), round(mean_exec_time::numeric, 3)) from pg_stat_statements where query like 'insert into pgjob.history_minutes%' order by calls desc limit 1")|" "$results"
series "pgjobd, plugin, retention 0 (workers $workers, concurrency $conc)" 0 "$workers" "$conc" "$n" noop >/dev/null

# Flow control (docs/queues.md): limits that never bind, then a binding
# global_concurrency and a binding rate.  The cost of one limited claim,
# from pg_stat_statements, goes in the row's note.
limited() { # name limits
	sql -c "select pg_stat_statements_reset()" >/dev/null
	local r
	r=$(runs=1 series "$1" 7d "$workers" "$conc" "$n" noop 1 "$2")
	local cost
	cost=$(sql -c "select format('%s limited claims, %s rows each, %s ms mean', calls, round(rows::numeric / greatest(calls, 1), 1), round(mean_exec_time::numeric, 3)) from pg_stat_statements where query like '%claim_limited%' order by calls desc limit 1")
	# The start rate by the claims' own clock (attempted_at), which the
	# watcher's first sight of a running job can miss the start of.
	local starts
	starts=$(sql -c "select format('%s starts/s by attempted_at', round(count(*) / greatest(extract(epoch from max(attempted_at) - min(attempted_at)), 0.001))) from pgjob.all_jobs")
	sed -i "\$ s|\$|limited claim: $cost; $starts|" "$results"
	echo "$r"
}
# A feature's cost: single runs later in the suite came out below the
# 3-run 7d median (0.79 to 0.88 of it in one run), and one run apart moved
# by a tenth with nothing changed (workflows idle 0.97 in one suite, 0.81
# in the next).  So each "on but idle" row runs in turn with 7d runs of its
# own: RUNS rounds of a 7d run and one run of each feature, then a row of
# medians for each (paired).  A run is a function that prints what
# drain() does, and nothing if it went wrong.
once_7d() { # [flow-control settings]
	config "$dir/run.yaml" "$workers" "$conc" 7d "${1:-}"
	fresh_schema
	enqueue "$n" noop >/dev/null
	drain "$n" 1 "$dir/run.yaml"
}
paired() { # name run [name run ...]: rows, then the medians, 7d first
	local -a names=("retention 7d, median of $runs in turn with the rows after it") fns=(once_7d) rates=() last=()
	while [ $# -gt 0 ]; do names+=("$1"); fns+=("$2"); shift 2; done
	local r i a b c d
	for r in $(seq "$runs"); do
		for i in "${!fns[@]}"; do
			read -r a b c d <<<"$("${fns[$i]}")"
			[ -n "$a" ] || { echo "suite: a run of \"${names[i]}\" failed" >&2; exit 1; }
			rates[i]="${rates[i]:-} $a"
			last[i]="$b $c $d"
		done
	done
	local meds=""
	for i in "${!fns[@]}"; do
		local med
		med=$(tr ' ' '\n' <<<"${rates[i]}" | grep . | median)
		read -r b c d <<<"${last[i]}"
		row "${names[i]}" "$med" "$(tr ' ' '\n' <<<"${rates[i]}" | grep . | sort -n | head -1)" \
			"$(tr ' ' '\n' <<<"${rates[i]}" | grep . | sort -n | tail -1)" "$b" "$c" "$d"
		meds="$meds $med"
	done
	echo "$meds"
}
once_limits_idle() { once_7d "global_concurrency: 1000000, rate: 100000000/s"; }
sql -c "select pg_stat_statements_reset()" >/dev/null
read -r flow_ref flow_idle <<<"$(paired "limits set, never binding (global_concurrency 1000000, rate 100000000/s)" once_limits_idle)"
[ -n "$flow_idle" ] || exit 1
sed -i "\$ s|\$|limited claim: $(sql -c "select format('%s limited claims, %s rows each, %s ms mean', calls, round(rows::numeric / greatest(calls, 1), 1), round(mean_exec_time::numeric, 3)) from pg_stat_statements where query like '%claim_limited%' order by calls desc limit 1")|" "$results"
flow_conc=$(limited "binding global_concurrency 4" "global_concurrency: 4")
flow_rate=$(limited "binding rate 5000/s, burst 100" "rate: 5000/s, burst: 100")
# Per key (schema versions 24 and 25): jobs over 100 limit keys, a limit
# that never binds (2,000 slots for the workers' 2,000 places), then 2 a key.
flow_key_idle=$(enq_keys=100 limited "per_key_concurrency 20, jobs over 100 keys (never binding)" "per_key_concurrency: 20")
flow_key=$(enq_keys=100 limited "binding per_key_concurrency 2, jobs over 100 keys" "per_key_concurrency: 2")

# Tracing (docs/tracing.md): every job in a trace of its own, its spans
# (enqueue, wait, attempt) not exported, then exported over OTLP/HTTP to a
# local sink that answers 200 to every request (the cost is pgjobd's:
# copying the attempt, the sender's JSON and requests).
py_sink=$(mktemp)
cat >"$py_sink" <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
"$py" "$py_sink" >"$dir/sink.port" &
sink=$!
until [ -s "$dir/sink.port" ]; do sleep 0.05; done
once_trace_off() { enq_tp=1 once_7d; }
once_trace_on() { enq_tp=1 cfg_extra="tracing: { otlp_endpoint: \"http://127.0.0.1:$(cat "$dir/sink.port")\" }" once_7d; }
read -r trace_ref trace_off trace_on <<<"$(paired "jobs in a trace, spans not exported" once_trace_off "jobs in a trace, spans exported (OTLP/HTTP, a local sink)" once_trace_on)"
kill "$sink" 2>/dev/null || true
rm -f "$py_sink"
[ -n "$trace_on" ] || exit 1

# The web console (docs/console.md) beside a drain of the 7d row's jobs:
# open but idle (nobody looking), then busy (four pages refreshed every
# second over one connection each: the overview, the jobs list, the queues
# and the dead jobs; two browsers' worth at the page's 2 s).  pgjob web has
# connections of its own; what it costs the workers is what its statements
# cost the database and the machine.
console_start() {
	"$build/pgjob" --database "$db" web --listen 127.0.0.1:0 2>"$dir/web.log" &
	web_pid=$!
	web_port=
	until [ -n "$web_port" ]; do
		kill -0 "$web_pid" || { echo "suite: pgjob web did not start: $(cat "$dir/web.log")" >&2; exit 1; }
		web_port=$(sed -n 's/.*console at http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$dir/web.log")
		sleep 0.1
	done
}
console_stop() {
	kill -TERM "$web_pid" 2>/dev/null || true
	wait "$web_pid" 2>/dev/null || true
	# Its last statements may still run on the server after it exits:
	# the next row's drop of the schema would deadlock with them.
	local i
	for i in $(seq 100); do
		[ "$(sql -c "select count(*) from pg_stat_activity where application_name = 'pgjob web'")" = 0 ] && break
		sleep 0.05
	done
}
console() { # busy: one 7d run beside the console; prints what drain() does
	console_start
	local poller= r
	if [ "$1" = 1 ]; then
		python3 - "$web_port" "$dir/web.polls" <<'PY' &
import http.client, sys, threading, time
port, out = int(sys.argv[1]), sys.argv[2]
n = [0]
def page(path):
    c = http.client.HTTPConnection("127.0.0.1", port)
    while True:
        t = time.monotonic()
        c.request("GET", "/api/" + path)
        c.getresponse().read()
        n[0] += 1
        open(out, "w").write(str(n[0]))
        time.sleep(max(0.0, 1 - (time.monotonic() - t)))
for p in ("overview", "jobs", "queues", "jobs?state=dead"):
    threading.Thread(target=page, args=(p,), daemon=True).start()
threading.Event().wait()
PY
		poller=$!
	fi
	r=$(once_7d)
	[ -n "$poller" ] && { kill "$poller" 2>/dev/null; wait "$poller" 2>/dev/null || true; }
	console_stop
	echo "$r"
}
console_idle() { console 0; }
console_busy() { console 1; }
read -r web_ref web_idle web_busy <<<"$(paired "web console open, idle (pgjob web, nobody looking)" console_idle \
	"web console busy (4 pages refreshed every second)" console_busy)"
[ -n "$web_busy" ] || exit 1
sed -i "\$ s|\$|$(cat "$dir/web.polls" 2>/dev/null || echo 0) page requests answered meanwhile (its last run)|" "$results"

# The attempt history (docs/operations.md): while jobs succeed nothing is
# written (the 7d row); here every job fails its first attempt, retried at
# once (in place, by the worker that held it, since schema version 43:
# docs/daemon.md, "Retries"), and is done at its second: one
# pgjob.attempts row per job, written
# by the statement that writes the failures (src/db/finish.c; by the
# trigger of sql/upgrade/013_attempts.sql before schema version 40).  In
# turn with 7d runs of its own, as the features' rows above: a ratio to the
# 7d row measured minutes before moved with the machine (0.42x and 0.32x in
# two runs of the same code).
once_fail_first() {
	config "$dir/run.yaml" "$workers" "$conc" 7d
	fresh_schema
	sql -c "insert into pgjob.jobs (kind, payload) select 'noop', jsonb_build_object('id', i, 'fail_first', true) from generate_series(1, $n) i" \
		-c "vacuum analyze pgjob.jobs" -c "checkpoint" >/dev/null
	drain "$n" 1 "$dir/run.yaml"
}
read -r hist_ref hist_busy <<<"$(paired "every job fails its first attempt (attempt history written)" once_fail_first)"
[ -n "$hist_busy" ] || exit 1
sed -i "\$ s|\$|$(sql -c "select format('%s attempts rows for %s jobs (its last run); %s attempts/s', (select count(*) from pgjob.attempts), count(*), $hist_busy * 2) from pgjob.all_jobs where state = 'done'")|" "$results"

# Workflows (docs/workflows.md): a fan-out and fan-in (one job, FAN
# children after it, one job after all of them), and a chain of CHAIN
# jobs, each after the one before.  Besides jobs/s, the time from a
# parent's end to its child's start, from the jobs' own timestamps (the
# finish's now() and the claim's): what releasing costs on the way.
workflow() { # name jobs setup-sql latency-sql
	config "$dir/run.yaml" "$workers" "$conc" 7d
	fresh_schema
	sql -c "$3" -c "vacuum analyze pgjob.jobs" -c "checkpoint" >/dev/null
	local a b c d
	read -r a b c d <<<"$(drain "$2" 1 "$dir/run.yaml")"
	row "$1" "$a" "$a" "$a" "$b" "$c" "$d" "$(sql -c "$4")"
	echo "$a"
}
# Workflows on but idle: FAN steps wait in the table for a parent that
# failed (on_parent_failure 'wait' keeps them until it is retried) while
# the 7d row's jobs drain beside them: what unfinished workflows cost the
# claims of everything else.
workflows_idle() {
	config "$dir/run.yaml" "$workers" "$conc" 7d
	fresh_schema
	sql -c "do \$\$ declare r bigint; begin
			r := pgjob.enqueue('noop');
			perform pgjob.enqueue('noop', depends_on => array[r], on_parent_failure => 'wait')
			  from generate_series(1, $fan);
			update pgjob.jobs set state = 'dead', finished_at = now(), last_error = 'bench' where id = r;
		end \$\$" >/dev/null
	enqueue "$n" noop >/dev/null
	local out waiting
	out=$(drain "$n" 1 "$dir/run.yaml")
	waiting=$(sql -c "select count(*) from pgjob.jobs where state = 'waiting'")
	[ "$waiting" = "$fan" ] || { echo "suite: $waiting of $fan workflow steps still waiting" >&2; return 1; }
	echo "$out"
}
read -r wf_ref wf_idle <<<"$(paired "workflows on but idle ($fan steps waiting beside the jobs)" workflows_idle)"
[ -n "$wf_idle" ] || exit 1

wf_fan=$(workflow "workflow: 1 job, $fan children after it, 1 job after them all" $((fan + 2)) \
	"do \$\$ declare r bigint; ids bigint[]; begin
		r := pgjob.enqueue('noop');
		select array_agg(pgjob.enqueue('noop', depends_on => array[r])) into ids
		  from generate_series(1, $fan);
		perform pgjob.enqueue('noop', depends_on => ids);
	end \$\$" \
	"select format('fan-out: the first child started %s ms and the last %s ms after the parent ended; fan-in: the last job started %s ms after its last parent ended',
		round(extract(epoch from min(c.attempted_at) - p.finished_at) * 1000, 2),
		round(extract(epoch from max(c.attempted_at) - p.finished_at) * 1000, 2),
		round(extract(epoch from s.attempted_at - max(c.finished_at)) * 1000, 2))
	  from pgjob.all_jobs p, pgjob.all_jobs c, pgjob.all_jobs s
	 where p.id = 1 and c.id between 2 and $fan + 1 and s.id = $fan + 2
	 group by p.finished_at, s.attempted_at")
wf_chain=$(workflow "workflow: a chain of $chain jobs, each after the one before" "$chain" \
	"do \$\$ declare p bigint; begin
		p := pgjob.enqueue('noop');
		for i in 2 .. $chain loop
			p := pgjob.enqueue('noop', depends_on => array[p]);
		end loop;
	end \$\$" \
	"select format('parent end to child start: mean %s ms, p50 %s ms, p99 %s ms, max %s ms',
		round(avg(x) * 1000, 2), round((percentile_cont(0.5) within group (order by x) * 1000)::numeric, 2),
		round((percentile_cont(0.99) within group (order by x) * 1000)::numeric, 2),
		round(max(x) * 1000, 2))
	  from (select extract(epoch from c.attempted_at - p.finished_at) as x
		  from pgjob.job_deps d join pgjob.all_jobs p on p.id = d.parent
		  join pgjob.all_jobs c on c.id = d.child) h")

# exec against the plugin at the same, handler-sized concurrency.
plug=$(runs=1 series "plugin, concurrency $exec_conc (reference for exec)" 7d "$workers" "$exec_conc" "$exec_n" noop)
exe=$(runs=1 series "exec /bin/true, concurrency $exec_conc" 7d "$workers" "$exec_conc" "$exec_n" true)
exec_overhead=$(awk -v p="$plug" -v e="$exe" 'BEGIN {printf "%.3f", 1000 / e - 1000 / p}')
# Process handlers at the same concurrency: one copy a worker holds all of
# it (the copies start with the first claim, inside the timed drain).
proc_py=$(runs=1 series "process handler, Python coroutine, concurrency $exec_conc" 7d "$workers" "$exec_conc" "$exec_n" noop_async)
proc_js=$(runs=1 series "process handler, Node, concurrency $exec_conc" 7d "$workers" "$exec_conc" "$exec_n" noop_js)
proc_rb=$(runs=1 series "process handler, Ruby, concurrency $exec_conc" 7d "$workers" "$exec_conc" "$exec_n" noop_rb)

# Latency and RSS at rest: an idle worker (one, as the peers' latency is
# measured with one process), single enqueues.
fresh_schema
config "$dir/lat.yaml" 1 "$conc" 7d
rm -f "$dir/starts"
export LAT_START_LOG="$dir/starts"
start_instances 1 "$dir/lat.yaml"
unset LAT_START_LOG
until [ "$(sql -c "select count(*) from pgjob.workers")" = 1 ]; do sleep 0.1; done
sleep 1
sup=${pids# }
rest_sup=$(rss_kb "$sup")
rest_worker=$(rss_kb "$(pgrep -P "$sup" | head -1)")
sql -c "select pg_stat_statements_reset()" >/dev/null
"$tool" latency "$db" "$lat_count" "$lat_ms" >"$dir/ends"
sleep 0.5
# Claims and finishes per job while jobs come one at a time: a claim on
# the NOTIFY and a finish, plus the poll timer's claims spread over the
# jobs.  (pg_stat_statements, not pg_stat_database: a backend that goes
# idle reports its transaction counts up to 10 s late.)
lat_stmts=$(sql -c "select round(coalesce(sum(calls), 0)::numeric / $lat_count, 2) from pg_stat_statements where query like 'with qa(name%' or query like 'with fd as%'")
stop_instances
lat=$(awk '$1 == "E" {e[$2] = $3} $1 == "S" {s[$2] = $3}
	END {for (k in e) if (k in s) print (s[k] - e[k]) / 1000}' "$dir/ends" "$dir/starts" |
	sort -n | awk '{a[NR] = $1} END {
		if (NR == 0) {print "none none 0"; exit}
		printf "%.2f %.2f %d\n", a[int(NR * 0.5 + 0.5)], a[int(NR * 0.99 + 0.5)], NR}')
read -r lat_p50 lat_p99 lat_n <<<"$lat"

# Latency under load (issue 20, target 5): a job enqueued into an idle
# queue while LOAD_RATE jobs/s flow through another.  Two workers serve
# 'default' (the bulk) and 'fast' (idle); the tool's feeder inserts
# LOAD_RATE jobs/s into 'default' for LOAD_S seconds (100 rows every
# 10 ms at 10,000/s, on its own connection) while single jobs go to
# 'fast', one per 20 ms at a random point of the feed's 10 ms tick (on a
# fixed grid each round measured one phase of the tick), timed from
# commit acknowledged to handler start as above.  It reports the rate it
# fed and the rate the bulk was drained at (fed less the backlog left
# when the feed stopped): a pgjobd that cannot
# keep up shows it there, not in a lower feed.  The rest of the bulk is
# drained before the instance stops.
#
# The table is not empty when the workers connect: LOAD_RATE jobs are
# queued, analyzed and drained first, as a running system's would be.  On
# a table never analyzed, the claim and finish were planned for a
# near-empty table (a seq scan of pgjob.jobs in each) until autovacuum
# analyzed it, and under this feed the drain fell to 1,500-2,500 jobs/s
# and the fast jobs waited seconds (docs/performance.md).  The worker's
# session now turns sequential scans off for that; the warm-up keeps this
# row about the steady state that target 5 is about either way.
fresh_schema
enqueue "$load_rate" noop >/dev/null
cat >"$dir/load.yaml" <<YAML
workers: 2
log: { level: warn }
retention: 7d
queues: { default: { concurrency: $conc }, fast: { concurrency: 10 } }
handlers:
  noop: { type: plugin, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench }
  # A worker claims from the queues its handlers name: this one puts
  # 'fast' among them (the tool enqueues kind noop into it).
  noop_fast: { type: plugin, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench, queue: fast }
YAML
rm -f "$dir/load.starts"
export LAT_START_LOG="$dir/load.starts"
start_instances 1 "$dir/load.yaml"
unset LAT_START_LOG
until [ "$(sql -c "select count(*) from pgjob.workers")" = 2 ]; do sleep 0.1; done
"$tool" wait "$db" 600 >/dev/null
"$tool" loadlat "$db" "$load_rate" "$load_s" 20 >"$dir/load.ends"
"$tool" wait "$db" 600 >/dev/null
stop_instances
load_count=$(grep -c '^E ' "$dir/load.ends" || true)
read -r load_p50 load_p99 load_max load_n <<<"$(awk '$1 == "E" {e[$2] = $3} $1 == "S" {s[$2] = $3}
	END {for (k in e) if (k in s) print (s[k] - e[k]) / 1000}' "$dir/load.ends" "$dir/load.starts" |
	sort -n | awk '{a[NR] = $1} END {
		if (NR == 0) {print "none none none 0"; exit}
		printf "%.2f %.2f %.2f %d\n", a[int(NR * 0.5 + 0.5)], a[int(NR * 0.99 + 0.5)], a[NR], NR}')"
load_feed=$(sed -n 's/^R //p' "$dir/load.ends")

# The dead tuples of the jobs table over a drain, from the watcher's
# samples: the count at each tenth of the run, from its start (the
# instances' launch) to its end.
dead_over_run() { # trace
	sort -n "$1" | awk '{t[NR] = $1; d[NR] = $2} END {
		if (NR == 0) exit
		s = ""
		for (k = 0; k <= 10; k++) {
			want = t[1] + (t[NR] - t[1]) * k / 10
			i = 1
			while (i < NR && t[i] < want) i++
			s = s (k ? ", " : "") d[i]
		}
		print s }'
}

# A backlog, then RSS at rest after it.
fresh_schema
enqueue "$backlog" noop
config "$dir/run.yaml" "$workers" "$conc" 7d
: >"$dir/dead.trace"
read -r a b c d <<<"$(PGJOBD_BENCH_DEAD_TRACE=$dir/dead.trace drain "$backlog" 1 "$dir/run.yaml")"
row "backlog of $backlog jobs (retention 7d)" "$a" "$a" "$a" "$b" "$c" "$d" \
	"dead tuples at each tenth of the run: $(dead_over_run "$dir/dead.trace")"
backlog_rate=$a
read -r after_sup after_worker <"$dir/rss"

# An old snapshot held open for the whole run.
fresh_schema
enqueue "$n" noop
# The snapshot is taken by its first statement and pins the xmin horizon
# until the transaction ends; it touches no table, so it takes no lock.
psql -X -q "$db" -c "begin isolation level repeatable read" \
	-c "select 1" -c "select pg_sleep(3600)" >/dev/null 2>&1 &
holder=$!
until [ "$(sql -c "select count(*) from pg_stat_activity where query like 'select pg_sleep(3600)%'")" = 1 ]; do sleep 0.1; done
: >"$dir/dead.trace"
read -r a b c d <<<"$(PGJOBD_BENCH_DEAD_TRACE=$dir/dead.trace drain "$n" 1 "$dir/run.yaml")"
row "old snapshot held through the run (retention 7d)" "$a" "$a" "$a" "$b" "$c" "$d" \
	"dead tuples at each tenth of the run: $(dead_over_run "$dir/dead.trace")"
snap_rate=$a
release_snapshot
wait "$holder" 2>/dev/null || true
holder=

# Fast from the first second (docs/performance.md, "Plans that do not
# depend on a table's size"): a fresh schema,
# never analyzed, pgjobd started on it and fed 80 % of the 7d row's rate,
# one INSERT ... SELECT every 100 ms (tests/bench/churn.py), for FRESH_S
# seconds: what it got done over them, against what was fed.  Until the
# worker's session turned sequential scans off, the plans made on the
# empty table read all of it for every batch until autovacuum's first
# ANALYZE, and such a feed ran at a tenth of its rate for a minute.
fresh_schema
fresh_rate=$(awk -v r="$base_keep" 'BEGIN {printf "%.0f", r * 0.8}')
fresh_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$dir/fresh.yaml" <<YAML
workers: $workers
log: { level: warn }
metrics: { listen: "127.0.0.1:$fresh_port" }
queues: { default: { concurrency: $conc } }
handlers:
  noop: { type: plugin, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench }
YAML
start_instances 1 "$dir/fresh.yaml"
until [ "$(sql -c "select count(*) from pgjob.workers")" = "$workers" ]; do sleep 0.1; done
python3 "$root/tests/bench/churn.py" "$db" "$fresh_port" "$fresh_rate" "$fresh_s" \
	"$fresh_s" 100 "$dir/fresh.tsv"
stop_instances
IFS=$'\t' read -r _ f_fed f_done f_p50 f_p99 _ f_backlog f_dead _ <"$dir/fresh.tsv"
row "fresh database under a feed of $fresh_rate jobs/s, its first $fresh_s s (retention 7d)" \
	"$f_done" "$f_done" "$f_done" "" "" "$f_dead" \
	"fed $f_fed jobs/s, done $f_done jobs/s; claim p50 $f_p50 ms, p99 $f_p99 ms; backlog at the end $f_backlog"
fresh_done=$f_done fresh_fed=$f_fed

# Scale: many instances of one worker, one instance of many workers.
# Each process gets the 7d row's config (concurrency $conc), as an operator
# copies one config to every host; SCALE_N jobs (3 x N), so that the
# processes' start and the last batches weigh little against a steady
# drain.  The reference is the 2-worker config at the same SCALE_N.  Then
# the same with the total concurrency held at the reference's (each
# process $conc x $workers / processes), beside the 2-worker config at that
# per-process concurrency: a claim takes at most that many jobs, and what
# smaller batches cost shows apart from what more processes cost.
scale_n=$((3 * n))
# One drain: "rate statements/job WAL/job dead errors server-errors|claim".
scale_once() { # instances workers concurrency
	local c=$3
	fresh_schema
	enqueue "$scale_n" noop
	config "$dir/scale.yaml" "$2" "$c" 7d
	sql -c "select pg_stat_statements_reset()" >/dev/null
	: >"$dir/scale.log"
	local before slog sbefore
	before=$(wc -l <"$dir/pgjobd.log")
	# The server's log of this drain only: the whole log held the
	# deadlocks of a row before (the console's last requests against the
	# next row's drop of the schema), counted again at every scale run.
	slog="$(cat "$dir/tmpdata" 2>/dev/null || echo "$dir/data")/server.log"
	sbefore=$(wc -l <"$slog")
	read -r a b c2 d <<<"$(drain "$scale_n" "$1" "$dir/scale.yaml")"
	local errs
	errs=$(tail -n +"$((before + 1))" "$dir/pgjobd.log" | grep -c -E 'level=(error|warn)|40P01|40001' || true)
	local server_errs
	server_errs=$(tail -n +"$((sbefore + 1))" "$slog" | grep -c -E 'deadlock detected|could not serialize' || true)
	local claim
	claim=$(sql -c "select format('%s statements, %s rows per statement, %s ms mean', calls, round(rows::numeric / greatest(calls, 1), 1), round(mean_exec_time::numeric, 2)) from pg_stat_statements where query like 'with qa(name%' order by calls desc limit 1")
	echo "$a $b $c2 $d $errs $server_errs|$claim"
}
# Shapes "IxW" at one concurrency, ROUNDS rounds of all of them in turn (so
# that each shape's runs meet the same minutes of the machine: one run of
# a row beside one run of another moved by a tenth with nothing changed);
# a row each, the median of its runs (its last run's claim figures, the
# errors of all); prints the medians in order.
scale_rows() { # concurrency rounds shape...
	local c=$1 rounds=$2 r i out
	shift 2
	local -a shapes=("$@") rates=() last=() errs=() serrs=()
	for r in $(seq "$rounds"); do
		for i in "${!shapes[@]}"; do
			out=$(scale_once "${shapes[i]%x*}" "${shapes[i]#*x}" "$c")
			read -r a b c2 d e se <<<"${out%%|*}"
			rates[i]="${rates[i]:-} $a"
			last[i]=$out
			errs[i]=$((${errs[i]:-0} + e))
			serrs[i]=$((${serrs[i]:-0} + se))
		done
	done
	local meds="" how=""
	[ "$rounds" -gt 1 ] && how=", median of $rounds in turn"
	for i in "${!shapes[@]}"; do
		local med lo hi
		med=$(tr ' ' '\n' <<<"${rates[i]}" | grep . | median)
		lo=$(tr ' ' '\n' <<<"${rates[i]}" | grep . | sort -n | head -1)
		hi=$(tr ' ' '\n' <<<"${rates[i]}" | grep . | sort -n | tail -1)
		read -r a b c2 d _ <<<"${last[i]%%|*}"
		row "$scale_n jobs: ${shapes[i]%x*} instance(s) x ${shapes[i]#*x} worker(s), concurrency $c each$how" \
			"$med" "$lo" "$hi" "$b" "$c2" "$d" \
			"log warnings/errors: ${errs[i]}; server deadlocks/serialization failures: ${serrs[i]}; claim (its last run): ${last[i]#*|}"
		meds="$meds $med"
	done
	echo "$meds"
}
read -r scale_ref scale_16x1 scale_4x4 scale_1x16 <<<"$(scale_rows "$conc" "$runs" "1x$workers" 16x1 4x4 1x16)"
split=$((conc * workers / 16))
[ "$split" -lt 1 ] && split=1
read -r split_ref split_16x1 <<<"$(scale_rows "$split" 1 "1x$workers" 16x1)"

# What must hold whatever the machine: every row measured, no job lost to
# the latency run, no error in a scale run.  Timing is only printed.
fail=0
[ "$(wc -l <"$results")" -eq 36 ] || { echo "suite: expected 36 rows" >&2; fail=1; }
[ "$lat_n" = "$lat_count" ] || { echo "suite: $lat_n of $lat_count latency jobs ran" >&2; fail=1; }
[ "$load_count" -gt 0 ] && [ "$load_n" = "$load_count" ] ||
	{ echo "suite: $load_n of $load_count fast-queue jobs ran under load" >&2; fail=1; }
# A round-trip budget, not a timing: one job at a time costs a claim and a
# finish (the claim that followed every end, and the one that followed
# every batch however short, made it four).
awk -v s="$lat_stmts" 'BEGIN {exit !(s <= 2.5)}' ||
	{ echo "suite: $lat_stmts claims and finishes per job one at a time (budget 2.5)" >&2; fail=1; }
if grep -q -E 'warnings/errors: [1-9]|failures: [1-9]' "$results"; then
	echo "suite: a scale run logged errors (see $dir.logs/pgjobd.log)" >&2
	fail=1
fi

# The table.
echo
echo "| run | jobs/s median | min | max | x ceiling (update) | statements/job | WAL B/job | max dead tuples |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
awk -F'\t' -v c="$ceil_update" '{
	printf "| %s | %s | %s | %s | %.2f | %s | %s | %s |\n", $1, $2, $3, $4, $2 / c, $5, $6, $7 }' "$results"
echo
awk -F'\t' '$8 != "" {print "- " $1 ": " $8}' "$results"
echo "- flow control: limits never binding $(awk -v a="$flow_idle" -v b="$flow_ref" 'BEGIN {printf "%.2f", a / b}') x the 7d runs in turn with it (medians of $runs); binding global_concurrency 4: $flow_conc jobs/s; binding rate 5000/s: $flow_rate jobs/s; per_key_concurrency 20 over 100 keys (never binding): $flow_key_idle jobs/s; binding per_key_concurrency 2: $flow_key jobs/s"
echo "- web console: open and idle $(awk -v a="$web_idle" -v b="$web_ref" 'BEGIN {printf "%.2f", a / b}') x the 7d runs in turn with them, busy $(awk -v a="$web_busy" -v b="$web_ref" 'BEGIN {printf "%.2f", a / b}') x (medians of $runs)"
echo "- tracing: jobs in a trace $(awk -v a="$trace_off" -v b="$trace_ref" 'BEGIN {printf "%.2f", a / b}') x the 7d runs in turn with them, their spans exported over OTLP/HTTP $(awk -v a="$trace_on" -v b="$trace_ref" 'BEGIN {printf "%.2f", a / b}') x (medians of $runs)"
r() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "- scale, $scale_n jobs, every process with the 2-worker row's config: 16 x 1 $(r "$scale_16x1" "$scale_ref") x, 4 x 4 $(r "$scale_4x4" "$scale_ref") x, 1 x 16 $(r "$scale_1x16" "$scale_ref") x the $workers-worker rate ($scale_ref jobs/s); total concurrency held, $split each: 16 x 1 $(r "$split_16x1" "$split_ref") x $workers workers at $split each ($split_ref jobs/s, $(r "$split_ref" "$scale_ref") x at $conc)"
echo "- workflows: on but idle ($fan steps waiting) $(awk -v a="$wf_idle" -v b="$wf_ref" 'BEGIN {printf "%.2f", a / b}') x the 7d runs in turn with it (medians of $runs); busy: the fan-out and chain rows"
echo "- attempt history: every job failing once, $(awk -v a="$hist_busy" -v b="$hist_ref" 'BEGIN {printf "%.2f", a / b}') x the 7d runs in turn with it in jobs/s (medians of $runs; each job two attempts)"
echo "- exec /bin/true per-job overhead over the plugin: $exec_overhead ms (1/rate, same workers and concurrency)"
echo "- process handlers against the plugin at concurrency $exec_conc: Python $(r "$proc_py" "$plug") x, Node $(r "$proc_js" "$plug") x, Ruby $(r "$proc_rb" "$plug") x"
echo "- fresh database under a feed: its first $fresh_s s did $fresh_done jobs/s of the $fresh_fed fed ($(awk -v a="$fresh_done" -v b="$fresh_fed" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}') x)"
echo "- backlog of $backlog: $(awk -v a="$backlog_rate" -v b="$base_keep" 'BEGIN {printf "%.2f", a / b}') x the $n-job rate; old snapshot: $(awk -v a="$snap_rate" -v b="$base_keep" 'BEGIN {printf "%.2f", a / b}') x"
echo "- wake-up latency, one idle worker, $lat_count single enqueues ${lat_ms} ms apart (commit acknowledged to handler start): p50 $lat_p50 ms, p99 $lat_p99 ms ($lat_n matched); $lat_stmts claims and finishes per job"
echo "- latency under load, 2 workers, $load_rate jobs/s fed to 'default' for $load_s s, single enqueues to the idle 'fast' one per 20 ms at random phases of the feed (commit acknowledged to handler start): p50 $load_p50 ms, p99 $load_p99 ms, max $load_max ms ($load_n of $load_count matched); feed: $load_feed"
echo "- RSS at rest: supervisor $rest_sup KiB, worker $rest_worker KiB; after the backlog of $backlog: supervisor $after_sup KiB, worker $after_worker KiB"

# Enqueue: pgjob.enqueue_many() and `pgjob enqueue --file` in jobs/s, a
# single pgjob.enqueue() against a plain INSERT (tests/bench/enqueue.sh, its
# own PostgreSQL; about 4 minutes, seconds with --short).
# --short leaves it and the workflow's to their own ctest test,
# bench.enqueue_short, which need not run alone as this one does.
if [ "$short" = 0 ]; then
	bash "$root/tests/bench/enqueue.sh" || fail=1
fi

# pgjob.enqueue_workflow() of 10,000 steps as a chain, a fan-out, a fan-in
# and a DAG (tests/bench/workflow.sh, its own PostgreSQL; seconds).
if [ "$short" = 0 ]; then
	bash "$root/tests/bench/workflow.sh" || fail=1
fi

# The web console's pages with a million jobs (tests/bench/web.sh, its own
# PostgreSQL; about a minute): full form only.
if [ "$short" = 0 ]; then
	bash "$root/tests/bench/web.sh" || fail=1
fi
exit "$fail"
