#!/usr/bin/env bash
# pgjobd in the side-by-side harness of ../shared/bench/peers, as its "cmd"
# system: the same private PostgreSQL, the same enqueue and completion
# rules as graphile-worker, pg-boss and the SQL-only ceiling.
#
#   tests/bench/peers.sh throughput [N] [RUNS] [WORKERS] [CONCURRENCY]
#   tests/bench/peers.sh latency [COUNT] [INTERVAL_MS] [WORKERS]
#   tests/bench/peers.sh compare [N] [ROUNDS] [WORKERS] [CONCURRENCY]
#
# compare runs, ROUNDS times over, one run each of: pgjobd with retention
# 0, pgjobd with retention 7d, graphile-worker at its fastest settings and
# the SQL-only ceiling (update on finish, batches of 100, 4 clients), in
# turn, so that a slow minute of a shared machine falls on all of them.
# It prints each system's median, min and max and the ratios of medians.
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
# pgjobd.yaml with $BENCH_RETENTION (default 7d); compare writes one per
# retention.
write_config() { # file retention
	cat >"$1" <<YAML
workers: $workers
log: { level: warn }
retention: $2
queues: { default: { concurrency: $concurrency } }
handlers:
  noop: { type: plugin, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench }
YAML
}
cfg="$BENCH_DIR/pgjobd.yaml"
write_config "$cfg" "${BENCH_RETENTION:-7d}"

# READY, which the latency harness waits for (30 s without it), once every
# worker holds its slot.
export CMD_WORKER="$build/pgjobd -c {config} -d {conninfo} & until [ \"\$(psql -Atc 'select count(*) from pgjob.workers' 2>/dev/null)\" = $workers ]; do sleep 0.1; done; echo READY; wait"
export CMD_SETUP="psql -q -c 'drop schema if exists pgjob cascade' && $build/pgjob migrate >/dev/null${BENCH_EXTRA_SETUP:+ && psql -q -c \"$BENCH_EXTRA_SETUP\"}"
export CMD_ENQUEUE_SQL="insert into pgjob.jobs (kind, payload) select 'noop', jsonb_build_object('id', i) from generate_series(1, :N) i"
# Unfinished jobs, read from the two small partial indexes rather than by
# scanning every row the run leaves behind.
export CMD_REMAINING_SQL="select (select count(*) from (select 1 from pgjob.jobs where state = 'available' order by queue, priority, run_at, id) a) + (select count(*) from pgjob.jobs where state = 'running')"
export CMD_LAT_ENQUEUE_SQL="select pgjob.enqueue('noop', jsonb_build_object('seq', \$1::int))"

graphile_cfg="conc=24,lq=500,batch=0,procs=2"

# What every system leaves behind, dropped after each run: otherwise
# autovacuum works through one system's dead rows during the next one's run.
clean() {
	psql -q -c "drop schema if exists pgjob cascade" \
		-c "drop schema if exists graphile_worker cascade" \
		-c "drop table if exists jobs, jobs_archive" -c "checkpoint" 2>/dev/null
}

# One throughput run of a system; prints its jobs/s.
one_run() { # system config n
	bash "$peers/harness.sh" throughput "$1" "$2" "$3" 1 2>/dev/null |
		awk -F'\t' '$1 == "tp" { print $7 }' | tail -1
	clean
}

compare() { # n rounds
	local n=$1 rounds=$2 r out="$BENCH_DIR/compare.tsv"
	[ -d "$NODE_DIR/node_modules/graphile-worker" ] ||
		{ echo "peers.sh: graphile-worker is missing; run $peers/setup_node.sh" >&2; exit 2; }
	write_config "$BENCH_DIR/pgjobd-r0.yaml" 0
	write_config "$BENCH_DIR/pgjobd-r7d.yaml" 7d
	: >"$out"
	clean
	for r in $(seq "$rounds"); do
		printf 'pgjobd, retention 0\t%s\n' "$(one_run cmd "$BENCH_DIR/pgjobd-r0.yaml" "$n")" >>"$out"
		printf 'pgjobd, retention 7d\t%s\n' "$(one_run cmd "$BENCH_DIR/pgjobd-r7d.yaml" "$n")" >>"$out"
		printf 'graphile-worker (%s)\t%s\n' "$graphile_cfg" "$(one_run graphile "$graphile_cfg" "$n")" >>"$out"
		# The C1 list is one blank: no batch-1 runs.
		printf 'SQL ceiling, update on finish, 100/batch, 4 clients\t%s\n' \
			"$(N100=$n bash "$peers/sqlbench.sh" 1 update " " 4 2>/dev/null |
				awk -F'\t' '$1 == "sql" { print $7 }' | tail -1)" >>"$out"
		clean
		echo "round $r of $rounds done" >&2
	done
	python3 - "$out" "$n" "$rounds" "$workers" "$concurrency" <<'PY'
import statistics, sys
path, n, rounds, workers, conc = sys.argv[1:]
runs = {}
for line in open(path):
    name, v = line.rstrip('\n').split('\t')
    runs.setdefault(name, []).append(float(v) if v else float('nan'))
med = {k: statistics.median(v) for k, v in runs.items()}
g = next(v for k, v in med.items() if k.startswith('graphile'))
c = next(v for k, v in med.items() if k.startswith('SQL'))
print(f"{n} jobs, {rounds} rounds in turn; pgjobd: {workers} workers x {conc}")
print("| system | jobs/s median (min-max) | x graphile-worker | x SQL ceiling (update) |")
print("| --- | ---: | ---: | ---: |")
for k, v in runs.items():
    print(f"| {k} | {med[k]:,.0f} ({min(v):,.0f}-{max(v):,.0f}) | {med[k] / g:.2f} | {med[k] / c:.2f} |")
PY
}

case "$mode" in
throughput) exec bash "$peers/harness.sh" throughput cmd "$cfg" "${1:-200000}" "${2:-3}" ;;
latency) exec bash "$peers/harness.sh" latency cmd "$cfg" "${1:-200}" "${2:-20}" ;;
compare)
	[ $# -ge 3 ] || workers=2
	[ $# -ge 4 ] || concurrency=1000
	compare "${1:-200000}" "${2:-3}"
	;;
*) echo "usage: peers.sh throughput|latency|compare ..." >&2; exit 2 ;;
esac
