#!/usr/bin/env bash
# Hours of churn: a steady feed into a fresh database, figures per minute
# (docs/performance.md, "Churn").  Not in CI: the full run takes MINUTES.
#
#   tests/bench/churn.sh [--minutes M] [--rate R | --fraction F]
#                        [--max-drain] [--snapshot] [--interval S]
#                        [--workers W] [--debug]
#
# 1. Unless --rate is given, the maximum under the feed: a fresh schema
#    fed 1.2 times what a drain of 200,000 queued jobs ran at (so that
#    the feed outruns the workers), for 90 s, no snapshot; from the
#    rates fed and done over its last 60 s, the rate at which feed and
#    drain meet (the sum is in the comment below).  The rate fed is F
#    (default 0.8) of it.  With --max-drain the maximum is the drain's
#    rate itself, as before 2026-12-03: on one machine the feeder's
#    inserts take CPU from the workers, and 80 % of a drain without them
#    is more than the machine finishes with them (docs/performance.md,
#    "Churn with a snapshot held, the maximum under the feed").
# 2. A fresh schema (pgjob migrate on an empty database: no statistics),
#    pgjobd started, and with --snapshot another session holding a
#    repeatable-read snapshot from before the first job to the end (the
#    forgotten transaction: vacuum can remove nothing the feed leaves).
# 3. The feed: R jobs/s, a statement every 100 ms, for M minutes (default
#    20), while tests/bench/churn.py samples every S seconds (default 60).
#
# Two hooks, for trials of another storage (docs/performance.md): with
# CHURN_SETUP_SQL=FILE, psql runs FILE after each fresh schema's migrate;
# with CHURN_BESIDE=CMD, CMD CONNINFO LOG runs beside the feed, from
# pgjobd's start to the end.
#
# With --debug the server logs autovacuum, checkpoints, lock waits,
# statements over 1 s and the plans of those over 700 ms (auto_explain),
# and its log and pg_stat_statements' slowest statements are kept in
# build/churn-debug/ (server.log, statements.txt) when the run ends; and
# once a second, from pgjobd's start, what every active backend does and
# waits for is sampled (waits.tsv: epoch second, what, wait) and summed
# per minute of the feed (waits.txt: the six most frequent per minute), so
# that a minute that falls behind shows what stood in the way.
#
# It prints one row per interval: jobs fed and done per second, the claim
# statement's p50 and p99 round trip (pgjobd's histogram) and mean
# execution time (pg_stat_statements), the backlog (fed, not yet done),
# the jobs table's dead tuples, table and index size; then the last
# interval against the first.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}

minutes=20 rate= fraction=0.8 max_drain=0 snapshot=0 interval=60 workers=2 conc=1000 debug=0
while [ $# -gt 0 ]; do
	case $1 in
	--minutes) minutes=$2; shift ;;
	--rate) rate=$2; shift ;;
	--fraction) fraction=$2; shift ;;
	--max-drain) max_drain=1 ;;
	--snapshot) snapshot=1 ;;
	--interval) interval=$2; shift ;;
	--workers) workers=$2; shift ;;
	--debug) debug=1 ;;
	*) echo "usage: churn.sh [--minutes M] [--rate R | --fraction F] [--max-drain] [--snapshot] [--interval S] [--workers W] [--debug]" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j"$(nproc)" --target pgjobd pgjob pgjobd_bench \
	pgjobd_bench_tool >/dev/null
dir="$build/bench-churn"
opts="-c shared_preload_libraries=pg_stat_statements"
# One line: pg_ctl hands its -o to a shell.
[ "$debug" = 1 ] && opts="$opts -c log_min_messages=log"\
" -c log_autovacuum_min_duration=0 -c log_checkpoints=on"\
" -c log_lock_waits=on -c log_min_duration_statement=1000"\
" -c session_preload_libraries=auto_explain"\
" -c auto_explain.log_min_duration=700"
PGJOBD_TESTPG_DURABLE=1 PGJOBD_TESTPG_OPTS="$opts" \
	bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
holder= pid= beside= sampler=
release_snapshot() {
	sql -c "select pg_terminate_backend(pid) from pg_stat_activity where query like 'select pg_sleep(7200)%'" >/dev/null
}
cleanup() {
	[ -n "$holder" ] && release_snapshot
	[ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	[ -n "$beside" ] && { kill -TERM "$beside" 2>/dev/null; wait "$beside" 2>/dev/null || true; }
	[ -n "$sampler" ] && { kill -TERM "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true; }
	[ "$debug" = 1 ] && keep_debug
	bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
}
keep_debug() {
	local out="$build/churn-debug"
	mkdir -p "$out"
	cp "$(cat "$dir/datadir")/server.log" "$out/server.log"
	sql -F ' | ' -c "select calls, round(mean_exec_time::numeric, 1),
		round(max_exec_time::numeric, 1),
		left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 80)
		from pg_stat_statements order by max_exec_time desc limit 15" \
		>"$out/statements.txt" 2>&1 || true
	if [ -s "$dir/waits.tsv" ]; then
		cp "$dir/waits.tsv" "$out/waits.tsv"
		# Per minute from the first sample: the six (what, wait) pairs
		# seen most often, with their count of samples.
		awk -F'\t' 'NR == 1 {t0 = $1} {n[int(($1 - t0) / 60) + 1 "\t" $2 " " $3]++}
			END {for (k in n) print k "\t" n[k]}' "$dir/waits.tsv" |
			sort -t$'\t' -k1,1n -k3,3nr |
			awk -F'\t' '$1 != m {m = $1; c = 0; printf "\nminute %d:", m}
				c++ < 6 {printf " %s %d;", $2, $3} END {print ""}' \
			>"$out/waits.txt"
	fi
	echo "churn: the server's log, slowest statements and wait samples are in $out" >&2
}
# Once a second: what each active backend runs (the claim, the finish, the
# feed's insert, or the statement's first words) and what it waits for;
# autovacuum and the checkpointer whenever they are at work.
sample_waits() {
	while sleep 1; do
		sql -F $'\t' -c "select extract(epoch from now())::bigint,
			case when backend_type <> 'client backend' then backend_type
			when query like 'with qa(name%' then 'claim'
			when query like 'with fd as%' then 'finish'
			when query like 'insert into pgjob.jobs%' then 'feed'
			else left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 40) end,
			coalesce(wait_event_type || ':' || wait_event, 'CPU')
			from pg_stat_activity
			where pid <> pg_backend_pid()
			and (state = 'active' and backend_type = 'client backend'
				and query not like 'select pg_sleep(7200)%'
				or backend_type = 'autovacuum worker'
				or backend_type = 'checkpointer'
				and wait_event is distinct from 'CheckpointerMain')" \
			>>"$dir/waits.tsv" 2>/dev/null || true
	done
}
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" "$@"; }
sql -c "create extension if not exists pg_stat_statements"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$dir/churn.yaml" <<YAML
workers: $workers
log: { level: warn }
metrics: { listen: "127.0.0.1:$port" }
queues: { default: { concurrency: $conc } }
handlers:
  noop: { type: plugin, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench }
YAML

fresh_schema() {
	sql -c "drop schema if exists pgjob cascade" 2>/dev/null
	"$build/pgjob" -d "$db" migrate >/dev/null
	if [ -n "${CHURN_SETUP_SQL:-}" ]; then sql -f "$CHURN_SETUP_SQL" >/dev/null; fi
}

if [ -z "$rate" ]; then
	fresh_schema
	sql -c "insert into pgjob.jobs (kind, payload) select 'noop', jsonb_build_object('id', i) from generate_series(1, 200000) i" \
		-c "vacuum analyze pgjob.jobs" -c "checkpoint"
	"$build/pgjobd" -c "$dir/churn.yaml" -d "$db" 2>>"$dir/pgjobd.log" &
	pid=$!
	read -r first end _ <<<"$("$build/pgjobd_bench_tool" wait "$db" 600 | sed 's/[a-z_]*=//g')"
	kill -TERM "$pid"; wait "$pid" || true; pid=
	max=$(awk -v f="$first" -v e="$end" 'BEGIN {printf "%.0f", 200000 / ((e - f) / 1e6)}')
	echo "a drain of 200,000: $max jobs/s" >&2
	if [ "$max_drain" = 0 ]; then
		fresh_schema
		"$build/pgjobd" -c "$dir/churn.yaml" -d "$db" 2>>"$dir/pgjobd.log" &
		pid=$!
		until [ "$(sql -c "select count(*) from pgjob.workers")" = "$workers" ]; do sleep 0.1; done
		over=$(awk -v m="$max" 'BEGIN {printf "%.0f", m * 1.2}')
		python3 "$root/tests/bench/churn.py" "$db" "$port" "$over" 90 30 100 \
			"$dir/max.tsv"
		kill -TERM "$pid"; wait "$pid" || true; pid=
		# The first 30 s are a fresh table's; the last 60 s give F fed and
		# D done per second.  The feed and the drain share the machine:
		# with c_f and c_d the CPU a job costs to feed and to run, and C
		# the machine, F c_f + D c_d = C = D0 c_d (D0: the drain alone).
		# The maximum under the feed is the rate x where they meet,
		# x (c_f + c_d) = C, so x = D0 / (1 + (D0 - D) / F).
		read -r fed done <<<"$(awk -F'\t' 'NR > 1 {f += $2; d += $3; n++}
			END {printf "%.0f %.0f\n", f / n, d / n}' "$dir/max.tsv")"
		drain=$max
		max=$(awk -v d0="$drain" -v f="$fed" -v d="$done" \
			'BEGIN {printf "%.0f", d0 / (1 + (d0 - d) / f)}')
		echo "fed $over jobs/s for 90 s: $fed fed and $done done per second over the last 60 s; the maximum under the feed: $max jobs/s" >&2
	fi
	rate=$(awk -v m="$max" -v f="$fraction" 'BEGIN {printf "%.0f", m * f}')
	echo "maximum: $max jobs/s; feeding $rate jobs/s" >&2
fi

fresh_schema
sql -c "select pg_stat_statements_reset()" -c "checkpoint" >/dev/null
if [ "$snapshot" = 1 ]; then
	psql -X -q "$db" -c "begin isolation level repeatable read" \
		-c "select 1" -c "select pg_sleep(7200)" >/dev/null 2>&1 &
	holder=$!
	until [ "$(sql -c "select count(*) from pg_stat_activity where query like 'select pg_sleep(7200)%'")" = 1 ]; do sleep 0.1; done
fi
"$build/pgjobd" -c "$dir/churn.yaml" -d "$db" 2>>"$dir/pgjobd.log" &
pid=$!
until [ "$(sql -c "select count(*) from pgjob.workers")" = "$workers" ]; do sleep 0.1; done
if [ "$debug" = 1 ]; then
	: >"$dir/waits.tsv"
	sample_waits &
	sampler=$!
fi
if [ -n "${CHURN_BESIDE:-}" ]; then
	$CHURN_BESIDE "$db" "$dir/beside.log" &
	beside=$!
fi
python3 "$root/tests/bench/churn.py" "$db" "$port" "$rate" "$((minutes * 60))" \
	"$interval" 100 "$dir/churn.tsv"

echo
echo "feed $rate jobs/s for $minutes min, $workers workers, retention 7d$([ "$snapshot" = 1 ] && echo ', a repeatable-read snapshot held from the start')"
echo
echo "| s | fed/s | done/s | claim p50 ms | claim p99 ms | claim mean ms (server) | backlog | dead tuples | table MB | indexes MB |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
awk -F'\t' '{printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10}' "$dir/churn.tsv"
awk -F'\t' 'NR == 1 {d = $3; p = $5} END {
	if (NR) printf "\nlast interval against the first: done/s %.2f x, claim p99 %.2f x; backlog at the end %s\n", $3 / d, $5 / p, $7 }' "$dir/churn.tsv"
