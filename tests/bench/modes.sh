#!/usr/bin/env bash
# Throughput per queue mode, in one run: N no-op jobs (example plugin) in a
# parallel queue, a serial queue, and a per_key queue with K ordering keys,
# each drained alone by one instance, on a private PostgreSQL at default
# durability.
#
#   tests/bench/modes.sh [N] [KEYS] [WORKERS]   (defaults: 5000, 100, 2)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
n=${1:-5000}
keys=${2:-100}
workers=${3:-2}
dir="$build/bench-modes-pg"

cmake --build "$build" -j"$(nproc)" >/dev/null
PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
trap 'bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null' EXIT
db=$(cat "$dir/conninfo")
"$build/pgjob" --database "$db" migrate >/dev/null

run() {
	local mode=$1 keyexpr=$2
	cat >"$dir/$mode.yaml" <<YAML
workers: $workers
log: { level: warn }
queues: { q: { concurrency: 100, mode: $mode } }
handlers:
  noop: { type: plugin, queue: q, library: "$build/pgjobd_example.so", symbol: pgjobd_example }
YAML
	psql -X -q "$db" -c "truncate pgjob.jobs, pgjob.jobs_done" \
		-c "insert into pgjob.jobs (kind, queue, ordering_key) select 'noop', 'q', $keyexpr from generate_series(1, $n) i" \
		-c "vacuum analyze pgjob.jobs"
	"$build/pgjobd" -c "$dir/$mode.yaml" -d "$db" 2>>"$dir/pgjobd.log" &
	local pid=$!
	until [ "$(psql -X -A -t "$db" -c "select count(*) from pgjob.jobs where state <> 'done'")" = 0 ]; do
		sleep 0.1
	done
	kill -TERM "$pid"; wait "$pid" || true
	psql -X -A -t "$db" -c "select format('%-8s jobs=%s keys=%s workers=%s jobs/s=%s', '$mode', count(*), count(distinct ordering_key), $workers, round(count(*) / extract(epoch from max(finished_at) - min(finished_at)))) from pgjob.all_jobs"
}

run parallel "null"
run serial "null"
run per_key "'k' || (i % $keys)"
