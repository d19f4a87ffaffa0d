#!/usr/bin/env bash
# pgjobd in the side-by-side harness of ../shared/bench/peers, as its "cmd"
# system: the same private PostgreSQL, the same enqueue and completion
# rules as graphile-worker, pg-boss and the SQL-only ceiling.
#
#   tests/bench/peers.sh throughput [N] [RUNS] [WORKERS] [CONCURRENCY]
#   tests/bench/peers.sh latency [COUNT] [INTERVAL_MS]
#
# First, in ../shared/bench/peers: ./pg.sh start (and ./setup_node.sh for
# latency, whose enqueuer is a node script).  Results go where the harness
# puts them; lib/summarize.py prints the tables.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
peers=${PEERS_DIR:-$root/../shared/bench/peers}
mode=${1:?usage: peers.sh throughput|latency ...}
shift

cmake --build "$build" -j"$(nproc)" >/dev/null
. "$peers/env.sh"
mkdir -p "$BENCH_DIR"
workers=${3:-2}
concurrency=${4:-200}
cfg="$BENCH_DIR/pgjobd.yaml"
cat >"$cfg" <<YAML
workers: $workers
log: { level: warn }
retention: ${BENCH_RETENTION:-7d}
queues: { default: { concurrency: $concurrency } }
handlers:
  noop: { type: plugin, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench }
YAML

export CMD_WORKER="$build/pgjobd -c {config} -d {conninfo}"
export CMD_SETUP="psql -q -c 'drop schema if exists pgjob cascade' && $build/pgjob migrate >/dev/null${BENCH_EXTRA_SETUP:+ && psql -q -c \"$BENCH_EXTRA_SETUP\"}"
export CMD_ENQUEUE_SQL="insert into pgjob.jobs (kind, payload) select 'noop', jsonb_build_object('id', i) from generate_series(1, :N) i"
# Unfinished jobs, read from the two small partial indexes rather than by
# scanning every row the run leaves behind.
export CMD_REMAINING_SQL="select (select count(*) from (select 1 from pgjob.jobs where state = 'available' order by queue, priority, run_at, id) a) + (select count(*) from pgjob.jobs where state = 'running')"
export CMD_LAT_ENQUEUE_SQL="select pgjob.enqueue('noop', jsonb_build_object('seq', \$1::int))"

case "$mode" in
throughput) exec bash "$peers/harness.sh" throughput cmd "$cfg" "${1:-200000}" "${2:-3}" ;;
latency) exec bash "$peers/harness.sh" latency cmd "$cfg" "${1:-200}" "${2:-20}" ;;
*) echo "usage: peers.sh throughput|latency ..." >&2; exit 2 ;;
esac
