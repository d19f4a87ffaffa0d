#!/usr/bin/env bash
# No-op jobs through the ways of running code in a worker's hands
# (docs/handlers.md, docs/performance.md "Process handlers"): the bench
# plugin in the worker; long-running programs in Python (a coroutine, and a
# plain function in the client's threads), Node and Ruby (process, the
# clients of clients/); and a program per job in each language (exec).  One
# private PostgreSQL at full durability (fsync and synchronous_commit on,
# the default retention), 2 workers, queue concurrency 8 a worker; a
# process handler has COPIES copies (default 1) of 8/COPIES jobs each a
# worker, the same 8 places.  Prints jobs/s per handler, timed by
# `pgjobd_bench_tool wait` as suite.sh does, its ratio to the plugin and to
# its language's exec, and CPU per job from /proc: pgjobd's processes,
# PostgreSQL's, and the handler's (the copies, or the exec commands, reaped
# by the workers).  Each run starts warm: pgjobd and its copies running
# (16 jobs first), the N jobs inserted while the queue is paused.
#
#   tests/bench/process.sh [N] [EXEC_N]     (20000 jobs, 400 for exec)
#   tests/bench/process.sh rss [JOBS] [EVERY] [LANGS]
#       JOBS (1,000,000) no-op jobs through one copy of each of LANGS
#       (python,node,ruby), EVERY (100,000) jobs at a time: prints the
#       copy's pid and resident set (VmRSS) after each.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
mode=throughput
if [ "${1:-}" = rss ]; then
	mode=rss
	shift
fi
n=${1:-20000}
[ "$mode" = rss ] && n=${1:-1000000}
exec_n=${2:-400}
copies=${COPIES:-1}
per_copy=$((8 / copies))

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
postmaster=$(head -1 "$dir/data/postmaster.pid")
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" "$@"; }

# process handler NAME: its program and client, by language.
proc_handler() { # name command...
	local name=$1 cmd
	shift
	cmd=$(printf '"%s", ' "$@")
	cat <<YAML
  $name:
    type: process
    command: [${cmd%, }]
    env: ["PYTHONPATH=$root/clients/python", "PGJOBD_CLIENT=$client"${extra_env:+, \"$extra_env\"}]
    copies: $copies
    concurrency: $per_copy
YAML
}
write_config() { # workers retention
	{
		echo "workers: $1"
		echo "retention: $2"
		echo "log: { level: warn }"
		echo "queues: { default: { concurrency: 8 } }"
		echo "handlers:"
		echo "  noop: { type: plugin, library: \"$build/pgjobd_bench.so\", symbol: pgjobd_bench }"
		echo "  exec_python: { type: exec, command: [\"python3\", \"-c\", \"import json, sys; json.load(sys.stdin)\"] }"
		echo "  exec_node: { type: exec, command: [\"node\", \"-e\", \"let s = ''; process.stdin.on('data', (d) => (s += d)).on('end', () => JSON.parse(s))\"] }"
		echo "  exec_ruby: { type: exec, command: [\"ruby\", \"-rjson\", \"-e\", \"JSON.parse(STDIN.read)\"] }"
		client="" proc_handler noop_async python3 "$root/tests/bench/noop_process.py"
		client="" proc_handler noop_sync python3 "$root/tests/bench/noop_process.py"
		client="$root/clients/node/pgjobd-handler.js" proc_handler noop_js node "$root/tests/bench/noop_process.js"
		# handlers.md: a threaded Ruby copy wants few malloc arenas.
		client="$root/clients/ruby/pgjobd_handler.rb" extra_env="MALLOC_ARENA_MAX=2" proc_handler noop_rb ruby "$root/tests/bench/noop_process.rb"
	} >"$dir/run.yaml"
}

# Jiffies used by pgjobd's processes, the handlers they run, and this
# PostgreSQL's (its postmaster's tree): "pgjobd handler postgres".  The handler's: its copies (the
# processes under pgjobd not named pgjobd) and the exec commands the
# workers reaped (their cutime and cstime).
cpu() {
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v root="$pid" -v pm="$postmaster" '
	{
		i = index($0, ") "); c = substr($0, index($0, "(") + 1, i - index($0, "(") - 1)
		split(substr($0, i + 2), f, " ")
		comm[$1] = c; ppid[$1] = f[2]; own[$1] = f[12] + f[13]; kids[$1] = f[14] + f[15]
	}
	END {
		for (p in comm) {
			for (q = p; q != "" && q != 0 && q != pm; q = ppid[q]) ;
			if (q == pm) pg += own[p]
			for (q = p; q != "" && q != 0 && q != root; q = ppid[q]) ;
			if (q != root) continue
			if (comm[p] == "pgjobd") { d += own[p]; h += kids[p] } else h += own[p]
		}
		print d + 0, h + 0, pg + 0
	}'
}

fresh() {
	sql -c "drop schema if exists pgjob cascade" 2>/dev/null
	"$build/pgjob" -d "$db" migrate >/dev/null
}

declare -A rate
run() { # kind jobs [exec kind to compare with]
	fresh
	# Warm: the copies started (and the plugin loaded) by 16 jobs first,
	# so that the drain times jobs, not an interpreter's start; then the
	# queue paused while the N jobs go in, and resumed once watched.
	"$build/pgjobd" -c "$dir/run.yaml" -d "$db" 2>>"$dir/pgjobd.log" &
	pid=$!
	sql -c "insert into pgjob.jobs (kind, payload) select '$1', jsonb_build_object('id', i) from generate_series(1, 16) i"
	"$build/pgjobd_bench_tool" wait "$db" 120 >/dev/null
	sql -c "select pgjob.pause('default')" >/dev/null
	sql -c "insert into pgjob.jobs (kind, payload) select '$1', jsonb_build_object('id', i) from generate_series(1, $2) i" \
		-c "vacuum analyze pgjob.jobs" -c "checkpoint"
	rm -f "$dir/ready"
	PGJOBD_BENCH_READY="$dir/ready" "$build/pgjobd_bench_tool" wait "$db" 900 >"$dir/wait.out" &
	local watch=$! c0 c1
	until [ -e "$dir/ready" ] || ! kill -0 "$watch" 2>/dev/null; do sleep 0.01; done
	c0=$(cpu)
	sql -c "select pgjob.resume('default')" >/dev/null
	wait "$watch"
	c1=$(cpu)
	kill -TERM "$pid"
	wait "$pid" || true
	pid=
	read -r first end _ <<<"$(sed 's/[a-z_]*=//g' "$dir/wait.out")"
	rate[$1]=$(awk -v n="$2" -v f="$first" -v e="$end" 'BEGIN {
		s = (e - f) / 1e6; if (s <= 0) s = 0.001; printf "%.0f", n / s }')
	local ratio x=0
	[ -n "$3" ] && x=${rate[$3]:-0}
	ratio=$(awk -v r="${rate[$1]}" -v p="${rate[noop]:-0}" -v x="$x" 'BEGIN {
		if (p > 0) printf "%5.2fx plugin", r / p; else printf "%12s", ""
		if (x > 0) printf " %6.0fx exec", r / x }')
	awk -v k="$1" -v n="$2" -v f="$first" -v e="$end" -v r="$ratio" -v hz="$(getconf CLK_TCK)" \
		-v c0="$c0" -v c1="$c1" 'BEGIN {
		split(c0, a, " "); split(c1, b, " ")
		s = (e - f) / 1e6; if (s <= 0) s = 0.001
		u = 1e6 / hz / n
		printf "%-12s %7d jobs %7.2f s %7.0f jobs/s %-25s CPU us/job: pgjobd %5.0f handler %6.0f postgres %5.0f\n",
			k, n, s, n / s, r, (b[1] - a[1]) * u, (b[2] - a[2]) * u, (b[3] - a[3]) * u }'
}

if [ "$mode" = throughput ]; then
	write_config 2 7d
	: >"$dir/pgjobd.log"
	echo "machine: $(nproc) cores; process handlers: $copies copies of $per_copy jobs a worker"
	# exec first: the process rows print their ratio to it.
	for k in exec_python exec_node exec_ruby noop; do run "$k" "$([ $k = noop ] && echo "$n" || echo "$exec_n")" ""; done
	run noop_async "$n" exec_python
	run noop_sync "$n" exec_python
	run noop_js "$n" exec_node
	run noop_rb "$n" exec_ruby
	exit 0
fi

# rss: one worker, one copy; the copy's VmRSS after each EVERY jobs.
every=${2:-100000}
langs=${3:-python,node,ruby}
copies=1 per_copy=8
write_config 1 0
: >"$dir/pgjobd.log"
IFS=, read -r -a list <<<"$langs"
for lang in "${list[@]}"; do
	case $lang in
	python) k=noop_async ;; node) k=noop_js ;; ruby) k=noop_rb ;;
	*) echo "process.sh: unknown language $lang" >&2; exit 2 ;;
	esac
	fresh
	"$build/pgjobd" -c "$dir/run.yaml" -d "$db" 2>>"$dir/pgjobd.log" &
	pid=$!
	done_n=0
	echo "$lang ($k): one copy, $n jobs"
	while [ "$done_n" -lt "$n" ]; do
		chunk=$((n - done_n < every ? n - done_n : every))
		sql -c "insert into pgjob.jobs (kind, payload) select '$k', jsonb_build_object('id', i) from generate_series(1, $chunk) i"
		"$build/pgjobd_bench_tool" wait "$db" 3600 >/dev/null
		done_n=$((done_n + chunk))
		copy=$(for s in /proc/[0-9]*/stat; do
			awk -v root="$pid" '{ print $1, $4, substr($2, 2, length($2) - 2) }' "$s" 2>/dev/null
		done | awk -v root="$pid" '{ pp[$1] = $2; c[$1] = $3 }
			END { for (p in c) { if (c[p] == "pgjobd") continue
				for (q = p; q != "" && q != 0 && q != root; q = pp[q]) ;
				if (q == root) print p } }')
		rss=$(awk '/^VmRSS/ {print $2, $3}' "/proc/$copy/status" 2>/dev/null || echo "?")
		printf '  %8d jobs  copy pid %-8s VmRSS %s\n' "$done_n" "$copy" "$rss"
	done
	kill -TERM "$pid"
	wait "$pid" || true
	pid=
done
