#!/usr/bin/env bash
# Hours of churn: a steady feed into a fresh database, figures per minute
# (docs/performance.md, "Churn").  Not in CI: the full run takes MINUTES.
#
#   tests/bench/churn.sh [--minutes M] [--rate R | --fraction F]
#                        [--snapshot] [--interval S] [--workers W]
#
# 1. Unless --rate is given, the maximum: a drain of 200,000 queued jobs
#    with the same config (fresh schema, vacuumed and analyzed), and the
#    rate fed is F (default 0.8) of it.
# 2. A fresh schema (pgjob migrate on an empty database: no statistics),
#    pgjobd started, and with --snapshot another session holding a
#    repeatable-read snapshot from before the first job to the end (the
#    forgotten transaction: vacuum can remove nothing the feed leaves).
# 3. The feed: R jobs/s, a statement every 100 ms, for M minutes (default
#    20), while tests/bench/churn.py samples every S seconds (default 60).
#
# It prints one row per interval: jobs fed and done per second, the claim
# statement's p50 and p99 round trip (pgjobd's histogram) and mean
# execution time (pg_stat_statements), the backlog (fed, not yet done),
# the jobs table's dead tuples, table and index size; then the last
# interval against the first.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}

minutes=20 rate= fraction=0.8 snapshot=0 interval=60 workers=2 conc=1000
while [ $# -gt 0 ]; do
	case $1 in
	--minutes) minutes=$2; shift ;;
	--rate) rate=$2; shift ;;
	--fraction) fraction=$2; shift ;;
	--snapshot) snapshot=1 ;;
	--interval) interval=$2; shift ;;
	--workers) workers=$2; shift ;;
	*) echo "usage: churn.sh [--minutes M] [--rate R | --fraction F] [--snapshot] [--interval S] [--workers W]" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j"$(nproc)" --target pgjobd pgjob pgjobd_bench \
	pgjobd_bench_tool >/dev/null
dir="$build/bench-churn"
PGJOBD_TESTPG_DURABLE=1 \
	PGJOBD_TESTPG_OPTS="-c shared_preload_libraries=pg_stat_statements" \
	bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
holder= pid=
release_snapshot() {
	sql -c "select pg_terminate_backend(pid) from pg_stat_activity where query like 'select pg_sleep(7200)%'" >/dev/null
}
cleanup() {
	[ -n "$holder" ] && release_snapshot
	[ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
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
	rate=$(awk -v m="$max" -v f="$fraction" 'BEGIN {printf "%.0f", m * f}')
	echo "maximum: $max jobs/s (a drain of 200,000); feeding $rate jobs/s" >&2
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
