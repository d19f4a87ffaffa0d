#!/usr/bin/env bash
# Baseline throughput: N no-op jobs through one pgjobd instance, with the
# example plugin and with an exec handler running /bin/true, on a private
# PostgreSQL at default durability (fsync and synchronous_commit on).
#
#   tests/bench/baseline.sh [N] [WORKERS]     (defaults: 10000 jobs, 2 workers)
#
# Prints one line per handler: jobs, wall seconds (start-up included), jobs/s
# over the wall time and between the first and the last finish, and
# commits per job.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
n=${1:-10000}
workers=${2:-2}
dir="$build/bench-pg"

cmake --build "$build" -j"$(nproc)" >/dev/null
PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
trap 'bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null' EXIT
db=$(cat "$dir/conninfo")
"$build/pgjob" --database "$db" migrate >/dev/null
cfg="$dir/bench.yaml"
cat >"$cfg" <<YAML
workers: $workers
log: { level: warn }
queues: { default: { concurrency: ${BENCH_CONCURRENCY:-100} } }
handlers:
  noop: { type: plugin, library: "$build/pgjobd_example.so", symbol: pgjobd_example }
  true: { type: exec, command: ["/bin/true"] }
YAML

run() {
	local kind=$1
	psql -X -q "$db" -c "truncate pgjob.jobs, pgjob.jobs_done" \
		-c "insert into pgjob.jobs (kind) select '$kind' from generate_series(1, $n)" \
		-c "vacuum analyze pgjob.jobs" -c "checkpoint"
	local xact0 t0 t1 xact1
	xact0=$(psql -X -A -t "$db" -c "select xact_commit from pg_stat_database where datname = current_database()")
	t0=$(date +%s.%N)
	"$build/pgjobd" -c "$cfg" -d "$db" 2>>"$dir/pgjobd.log" &
	local pid=$!
	until [ "$(psql -X -A -t "$db" -c "select count(*) from pgjob.jobs where state <> 'done'")" = 0 ]; do
		sleep 0.05
	done
	t1=$(date +%s.%N)
	# The rate between the first and the last finish: start-up excluded.
	span=$(psql -X -A -t "$db" -c "select extract(epoch from max(finished_at) - min(finished_at)) from pgjob.all_jobs")
	xact1=$(psql -X -A -t "$db" -c "select xact_commit from pg_stat_database where datname = current_database()")
	kill -TERM "$pid"; wait "$pid" || true
	awk -v k="$kind" -v n="$n" -v w="$workers" -v t0="$t0" -v t1="$t1" -v sp="$span" -v x="$((xact1 - xact0))" 'BEGIN {
		s = t1 - t0; printf "%-8s workers=%d jobs=%d wall_s=%.2f jobs/s=%.0f (first to last finish: %.0f) commits/job=%.3f\n", k, w, n, s, n / s, n / sp, x / n }'
}

run noop
run true
