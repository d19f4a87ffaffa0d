#!/usr/bin/env bash
# A claim that writes no row per job and one that writes no index entry,
# against the claim pgjobd makes (docs/performance.md, "A claim that writes
# no row per job", "A claim that writes no index entry"):
#
#   tests/bench/cursor.sh [--jobs N] [--rounds R] [--short]
#
# It starts its own PostgreSQL at default durability, migrates the pgjob
# schema (for the jobs table's definition: every column, index and
# constraint), and in R rounds (default 3), the three claims in turn: N jobs
# (default 400,000) queued into a copy of pgjob.jobs, analyzed, a
# checkpoint, then pgbench with 2 clients (as 2 workers) runs
# tests/bench/ceiling/row_claim.sql, hot_claim.sql (on the table of
# hot_schema.sql) or cursor_claim.sql (batches of 1,000: the claim, then
# the end as a delete) until the table is empty.  One line per round and
# claim: jobs/s, the machine's CPU per job (all processes, from
# /proc/stat), WAL bytes per job, and the share of the table's updates
# that were HOT (no index entry; "none": the claim updates no job row).
# Figures are printed, never asserted; what is checked is that each drain
# took every job and left no lease.
# --short: 20,000 jobs, one round (the ctest bench.cursor_short).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}

n=400000 rounds=3
while [ $# -gt 0 ]; do
	case $1 in
	--jobs) n=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--short) n=20000 rounds=1 ;;
	*) echo "usage: cursor.sh [--jobs N] [--rounds R] [--short]" >&2; exit 2 ;;
	esac
	shift
done
[ $((n % 2000)) = 0 ] || { echo "cursor.sh: --jobs must be a multiple of 2,000" >&2; exit 2; }

cmake --build "$build" -j"$(nproc)" --target pgjob >/dev/null
dir="$build/bench-cursor"
PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
trap 'bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null' EXIT
db=$(cat "$dir/conninfo")
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" "$@"; }
# Quiet about a schema that is not there yet, not about an error.
sql -c "set client_min_messages = warning" -c "drop schema if exists pgjob cascade"
"$build/pgjob" -d "$db" migrate >/dev/null
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }

echo "$n jobs, 2 pgbench clients, batches of 1,000, retention 0, $rounds rounds in turn"
for r in $(seq "$rounds"); do
	for claim in row hot cursor; do
		schema=cursor_schema
		[ "$claim" = hot ] && schema=hot_schema
		sql -f "$root/tests/bench/ceiling/$schema.sql" >/dev/null
		sql -c "insert into cursor_bench_jobs (kind, payload) select 'noop', jsonb_build_object('id', i) from generate_series(1, $n) i" \
			-c "update cursor_bench_cursors set upto = (select min(id) - 1 from cursor_bench_jobs)" \
			-c "vacuum analyze cursor_bench_jobs" -c "vacuum analyze cursor_bench_cursors" \
			-c "checkpoint" >/dev/null
		l0=$(sql -c "select pg_current_wal_lsn()")
		c0=$(busy) t0=$(date +%s.%N)
		pgbench -n -c 2 -j 2 -t $((n / 2000)) \
			-f "$root/tests/bench/ceiling/${claim}_claim.sql" "$db" >"$dir/pgbench.out" 2>&1 ||
			{ cat "$dir/pgbench.out" >&2; exit 1; }
		t1=$(date +%s.%N) c1=$(busy)
		wal=$(sql -c "select round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$l0') / $n)")
		left=$(sql -c "select count(*) from cursor_bench_jobs")
		leases=$(sql -c "select count(*) from cursor_bench_batches")
		# The claim's backends report their counts as they exit.
		sleep 1
		hot=$(sql -c "select coalesce(round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0)) || ' %', 'none')
			from pg_stat_user_tables where relid = 'cursor_bench_jobs'::regclass")
		awk -v r="$r" -v c="$claim" -v n="$n" -v t0="$t0" -v t1="$t1" \
			-v cpu=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v w="$wal" -v h="$hot" 'BEGIN {
			printf "round %d, %s claim: %.0f jobs/s, machine CPU %.1f us/job, WAL %d B/job, HOT updates %s\n",
				r, c, n / (t1 - t0), cpu / hz * 1e6 / n, w, h }'
		if [ "$left" != 0 ] || [ "$leases" != 0 ]; then
			echo "cursor.sh: the $claim claim left $left jobs and $leases leases" >&2
			exit 1
		fi
	done
done
