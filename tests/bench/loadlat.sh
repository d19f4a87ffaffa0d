#!/usr/bin/env bash
# Latency under load alone (issue 20, target 5), one build or several in
# turn on one server, so that a change to the wake-up path is measured
# against the build before it in the same hour:
#
#   tests/bench/loadlat.sh [--rounds R] [--seconds S] [--rate N] [BUILD ...]
#
# Each round runs, for each BUILD folder (default: build/), the suite's
# "latency under load" row (tests/bench/suite.sh, where the setup is
# explained): 2 workers serve 'default' (concurrency 1000) and 'fast'
# (idle, concurrency 10); pgjobd_bench_tool loadlat feeds N jobs/s (default
# 10,000) into 'default' for S seconds (default 30) and enqueues single
# jobs into 'fast', one per 20 ms, each at a random point of the feed's
# 10 ms tick.  One line per build and round: p50, p99 and max from commit
# acknowledged to handler start, the fast jobs matched, and the tool's
# feed line.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

rounds=3 seconds=30 rate=10000 builds=()
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift ;;
	--seconds) seconds=$2; shift ;;
	--rate) rate=$2; shift ;;
	-*) echo "usage: loadlat.sh [--rounds R] [--seconds S] [--rate N] [BUILD ...]" >&2; exit 2 ;;
	*) builds+=("$(cd "$1" && pwd)") ;;
	esac
	shift
done
[ ${#builds[@]} -gt 0 ] || builds=("$root/build")

for b in "${builds[@]}"; do
	cmake --build "$b" -j"$(nproc)" --target pgjobd pgjob pgjobd_bench \
		pgjobd_bench_tool >/dev/null
done
dir="${builds[0]}/bench-loadlat"
PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
pid=
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
	bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
}
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" "$@"; }

for r in $(seq "$rounds"); do
	for b in "${builds[@]}"; do
		sql -c "drop schema if exists pgjob cascade" 2>/dev/null
		"$b/pgjob" -d "$db" migrate >/dev/null
		# Warm: the table has been filled, analyzed and drained, as a
		# running system's has (suite.sh).
		sql -c "insert into pgjob.jobs (kind, payload) select 'noop', jsonb_build_object('id', i) from generate_series(1, $rate) i" \
			-c "vacuum analyze pgjob.jobs" -c "checkpoint"
		cat >"$dir/load.yaml" <<YAML
workers: 2
log: { level: warn }
retention: 7d
queues: { default: { concurrency: 1000 }, fast: { concurrency: 10 } }
handlers:
  noop: { type: plugin, library: "$b/pgjobd_bench.so", symbol: pgjobd_bench }
  noop_fast: { type: plugin, library: "$b/pgjobd_bench.so", symbol: pgjobd_bench, queue: fast }
YAML
		rm -f "$dir/starts"
		LAT_START_LOG="$dir/starts" "$b/pgjobd" -c "$dir/load.yaml" -d "$db" 2>>"$dir/pgjobd.log" &
		pid=$!
		until [ "$(sql -c "select count(*) from pgjob.workers")" = 2 ]; do sleep 0.1; done
		"$b/pgjobd_bench_tool" wait "$db" 600 >/dev/null
		"$b/pgjobd_bench_tool" loadlat "$db" "$rate" "$seconds" 20 >"$dir/ends"
		"$b/pgjobd_bench_tool" wait "$db" 600 >/dev/null
		kill -TERM "$pid"
		wait "$pid" || true
		pid=
		lat=$(awk '$1 == "E" {e[$2] = $3} $1 == "S" {s[$2] = $3}
			END {for (k in e) if (k in s) print (s[k] - e[k]) / 1000}' "$dir/ends" "$dir/starts" |
			sort -n | awk '{a[NR] = $1} END {
				if (NR == 0) {print "none"; exit}
				printf "p50 %.2f ms, p99 %.2f ms, max %.2f ms, %d jobs\n", a[int(NR * 0.5 + 0.5)], a[int(NR * 0.99 + 0.5)], a[NR], NR}')
		echo "round $r $b: $lat; $(sed -n 's/^R //p' "$dir/ends")"
	done
done
