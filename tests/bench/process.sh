#!/usr/bin/env bash
# No-op jobs through the three ways of running code in a worker's hands
# (docs/handlers.md): the bench plugin in the worker, a Python program per
# job (exec), and long-running Python programs (process: a coroutine, and a
# plain function in the client's threads).  One private PostgreSQL at
# default durability, 2 workers, queue concurrency 8 a worker; a process
# handler has 2 copies of 4 jobs each a worker, the same 8 places.  Prints
# jobs/s per handler, timed by `pgjobd_bench_tool wait` as suite.sh does.
#
#   tests/bench/process.sh [N] [EXEC_N]     (20000 jobs, 400 for exec)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
n=${1:-20000}
exec_n=${2:-400}

cmake --build "$build" -j"$(nproc)" --target pgjobd pgjob pgjobd_bench \
	pgjobd_bench_tool >/dev/null
dir="$build/bench-process"
PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
pid=
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
}
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" "$@"; }

cat >"$dir/run.yaml" <<YAML
workers: 2
log: { level: warn }
queues: { default: { concurrency: 8 } }
handlers:
  noop: { type: plugin, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench }
  exec_python: { type: exec, command: ["python3", "-c", "import json, sys; json.load(sys.stdin)"] }
  noop_async:
    type: process
    command: ["python3", "$root/tests/bench/noop_process.py"]
    env: ["PYTHONPATH=$root/clients/python"]
    copies: 2
    concurrency: 4
  noop_sync:
    type: process
    command: ["python3", "$root/tests/bench/noop_process.py"]
    env: ["PYTHONPATH=$root/clients/python"]
    copies: 2
    concurrency: 4
YAML

run() { # kind jobs
	sql -c "drop schema if exists pgjob cascade" 2>/dev/null
	"$build/pgjob" -d "$db" migrate >/dev/null
	sql -c "insert into pgjob.jobs (kind, payload) select '$1', jsonb_build_object('id', i) from generate_series(1, $2) i" \
		-c "vacuum analyze pgjob.jobs" -c "checkpoint"
	rm -f "$dir/ready"
	PGJOBD_BENCH_READY="$dir/ready" "$build/pgjobd_bench_tool" wait "$db" 600 >"$dir/wait.out" &
	local watch=$!
	until [ -e "$dir/ready" ] || ! kill -0 "$watch" 2>/dev/null; do sleep 0.01; done
	"$build/pgjobd" -c "$dir/run.yaml" -d "$db" 2>>"$dir/pgjobd.log" &
	pid=$!
	wait "$watch"
	kill -TERM "$pid"
	wait "$pid" || true
	pid=
	read -r first end _ <<<"$(sed 's/[a-z_]*=//g' "$dir/wait.out")"
	awk -v k="$1" -v n="$2" -v f="$first" -v e="$end" 'BEGIN {
		s = (e - f) / 1e6; if (s <= 0) s = 0.001
		printf "%-12s %7d jobs %8.2f s %9.0f jobs/s\n", k, n, s, n / s }'
}

: >"$dir/pgjobd.log"
run noop "$n"
run noop_async "$n"
run noop_sync "$n"
run exec_python "$exec_n"
