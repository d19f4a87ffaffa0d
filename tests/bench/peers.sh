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
# 0, pgjobd with retention 7d, the same with the no-op job in a process
# handler in each of $PROCESS_LANGS (default "python node ruby"; the
# clients of clients/), graphile-worker and pg-boss at their fastest
# settings and the SQL-only ceiling (update on finish, batches of 100, 4
# clients), in turn, so that a slow minute of a shared machine falls on all
# of them.  It prints each system's median, min and max, the ratios of
# medians, and per system the CPU seconds per 1,000 jobs (PostgreSQL's and
# its own), the WAL bytes and the transactions per job (see compare()).
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
# Debian's interpreter, not whatever shim PATH puts first.
py=$(command -v /usr/bin/python3 || command -v python3)

cmake --build "$build" -j"$(nproc)" >/dev/null
. "$peers/env.sh"
mkdir -p "$BENCH_DIR"
workers=${3:-2}
concurrency=${4:-200}
# pgjobd.yaml with $BENCH_RETENTION (default 7d); compare writes one per
# retention, and one per language of the process handlers (the no-op job
# in Python, Node or Ruby, one copy a worker holding its concurrency).
write_config() { # file retention [python|node|ruby]
	local handler="noop: { type: plugin, library: \"$build/pgjobd_bench.so\", symbol: pgjobd_bench }"
	case ${3:-} in
	python) handler="noop: { type: process, command: [\"$py\", \"$root/tests/bench/noop_process.py\"], env: [\"PYTHONPATH=$root/clients/python\", \"BENCH_KIND=noop\"], concurrency: $concurrency }" ;;
	node) handler="noop: { type: process, command: [\"$(command -v node)\", \"$root/tests/bench/noop_process.js\"], env: [\"PGJOBD_CLIENT=$root/clients/node/pgjobd-handler.js\", \"BENCH_KIND=noop\"], concurrency: $concurrency }" ;;
	ruby) handler="noop: { type: process, command: [\"$(command -v ruby)\", \"$root/tests/bench/noop_process.rb\"], env: [\"PGJOBD_CLIENT=$root/clients/ruby/pgjobd_handler.rb\", \"BENCH_KIND=noop\"], concurrency: $concurrency }" ;;
	esac
	cat >"$1" <<YAML
workers: $workers
log: { level: warn }
retention: $2
queues: { default: { concurrency: $concurrency } }
handlers:
  $handler
YAML
}
cfg="$BENCH_DIR/pgjobd.yaml"
write_config "$cfg" "${BENCH_RETENTION:-7d}"

# READY, which the latency harness waits for (30 s without it), once every
# worker holds its slot.
export CMD_WORKER="$build/pgjobd -c {config} -d {conninfo} & until [ \"\$(psql -Atc 'select count(*) from pgjob.workers' 2>/dev/null)\" = $workers ]; do sleep 0.1; done; echo READY; wait"
export CMD_SETUP="psql -q -c 'drop schema if exists pgjob cascade' && $build/pgjob migrate >/dev/null${BENCH_EXTRA_SETUP:+ && psql -q -c \"$BENCH_EXTRA_SETUP\"}"
export CMD_ENQUEUE_SQL="insert into pgjob.jobs (kind, payload) select 'noop', jsonb_build_object('id', i) from generate_series(1, :N) i"
# Unfinished jobs, read from the two partial indexes rather than by
# scanning every row the run leaves behind: the available jobs, and while
# there are none, whether any job still runs (1 or 0), read from the
# newest lease back.  A count of the running jobs, which the poller took
# until 2026-12-04, read every entry of jobs_running_idx that the drain had
# left (90,000 heap rows fetched and 27-47 ms of the server's CPU a poll,
# halfway through a drain of 300,000), taken from what it measured.  The
# running jobs not counted make the first poll that saw progress come
# sooner and its count smaller by at most the jobs in flight (2,000 of
# 200,000): pgjobd's rate, if anything, comes out lower.
export CMD_REMAINING_SQL="select count(*) from (select 1 from pgjob.jobs where finished_at is null and coalesce(parents_left, 0) = 0 order by queue, priority, run_at, id) a"
export CMD_LAT_ENQUEUE_SQL="select pgjob.enqueue('noop', jsonb_build_object('seq', \$1::int))"

graphile_cfg="conc=24,lq=500,batch=0,procs=2"
PROCESS_LANGS=${PROCESS_LANGS-python node ruby}
# pg-boss at the fastest settings of ../shared/bench/peers/RESULTS.md: 4
# work() loops fetching 5,000 jobs per poll, polled every 0.5 s (its
# least).
pgboss_cfg="workers=4,batch=5000"

# What every system leaves behind, dropped after each run: otherwise
# autovacuum works through one system's dead rows during the next one's run.
clean() {
	psql -q -c "drop schema if exists pgjob cascade" \
		-c "drop schema if exists graphile_worker cascade" \
		-c "drop schema if exists pgboss cascade" \
		-c "drop table if exists jobs, jobs_archive" -c "checkpoint" 2>/dev/null
}

# The cost columns of compare.  The harness is not ours to change, so they
# are taken around it through three wrappers put first in PATH and $NODE
# for the run (written by wrappers() below):
#   - psql: after the statement that ends with "checkpoint" (the harness's
#     and sqlbench's last step before the workers or pgbench start), a
#     snapshot "before";
#   - node: the poller's JSON (its poll count) and the instant it saw the
#     queue empty;
#   - pgbench: its own CPU time (the SQL ceiling's client).
# The snapshot "after" is taken once the run's processes are gone, so that
# every backend has exited: its statistics are flushed and its CPU time is
# in the postmaster's reaped children's.  A snapshot is "<WAL position in
# bytes> <transactions of the database> <CPU ticks of PostgreSQL>
# <CLOCK_REALTIME ns>", PostgreSQL's CPU being the utime+stime of the
# postmaster and its live children plus the cutime+cstime of those it
# reaped (backends, autovacuum workers).
snap_dir="$BENCH_DIR/compare.snap"
wrappers() {
	local w="$BENCH_DIR/compare.wrap" real_psql real_node real_pgbench
	real_psql=$(command -v psql)
	real_node=$(command -v "${NODE:-node}")
	real_pgbench=$(command -v pgbench)
	mkdir -p "$w" "$snap_dir"
	cat >"$w/snap" <<SH
#!/usr/bin/env bash
pm=\$(head -1 "$PGDATA_DIR/postmaster.pid")
read -r st </proc/\$pm/stat
f=(\${st##*) })
t=\$((f[11] + f[12] + f[13] + f[14]))
for c in \$(pgrep -P "\$pm"); do
	{ read -r st </proc/\$c/stat; } 2>/dev/null || continue
	f=(\${st##*) })
	t=\$((t + f[11] + f[12]))
done
x=\$("$real_psql" -X -A -t -F' ' -c "select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, xact_commit + xact_rollback from pg_stat_database where datname = current_database()")
echo "\$x \$t \$(date +%s%N)"
SH
	cat >"$w/psql" <<SH
#!/usr/bin/env bash
[ "\${*: -1}" = checkpoint ] || exec "$real_psql" "\$@"
"$real_psql" "\$@" || exit
"$w/snap" >"$snap_dir/before"
SH
	cat >"$w/node" <<SH
#!/usr/bin/env bash
case "\$1" in */poll_done.js) ;; *) exec "$real_node" "\$@" ;; esac
out=\$("$real_node" "\$@")
rc=\$?
date +%s%N >"$snap_dir/end"
printf '%s\n' "\$out" | tee "$snap_dir/poll"
exit \$rc
SH
	cat >"$w/pgbench" <<SH
#!/usr/bin/env bash
"$real_pgbench" "\$@"
rc=\$?
# times in this shell, not in a pipeline's subshell, which has no children.
times >"$snap_dir/times"
tail -1 "$snap_dir/times" | awk '{
	split(\$1, u, "[ms]"); split(\$2, s, "[ms]")
	print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' >"$snap_dir/client"
exit \$rc
SH
	chmod +x "$w/snap" "$w/psql" "$w/node" "$w/pgbench"
	wrap_path="$w:$PATH"
}

# After a run: waits for its backends to go, then prints "<PostgreSQL CPU
# s> <WAL bytes> <transactions>" since the snapshot "before", less the
# transactions that were the measurement's: the snapshot's own and,
# given, OTHER more (the poller's polls, sqlbench's count).
after_run() { # other
	# At most 10 s: a session of someone else's would hold it forever.
	local i
	for i in $(seq 100); do
		[ "$(psql -X -A -t -c "select count(*) from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()")" = 0 ] && break
		sleep 0.1
	done
	local w0 x0 t0 n0 w1 x1 t1 n1
	read -r w0 x0 t0 n0 <"$snap_dir/before"
	read -r w1 x1 t1 n1 <<<"$("$BENCH_DIR/compare.wrap/snap")"
	echo "$(awk -v t="$((t1 - t0))" 'BEGIN {printf "%.2f", t / 100}') $((w1 - w0)) $((x1 - x0 - 1 - $1))"
}

# One throughput run of a system; prints "<jobs/s> <PostgreSQL CPU s>
# <system CPU s> <WAL bytes> <transactions>".  The system's CPU is the
# harness's worker cores times the run (its process groups, from launch to
# the empty queue).
one_run() { # system config n
	rm -f "$snap_dir"/*
	local line jps cores polls
	line=$(PATH=$wrap_path NODE="$BENCH_DIR/compare.wrap/node" \
		bash "$peers/harness.sh" throughput "$1" "$2" "$3" 1 2>/dev/null |
		awk -F'\t' '$1 == "tp"' | tail -1)
	jps=$(cut -f7 <<<"$line")
	cores=$(cut -f10 <<<"$line")
	polls=$(sed -n 's/.*"polls":\([0-9]*\).*/\1/p' "$snap_dir/poll" 2>/dev/null)
	local cost
	cost=$(after_run "${polls:-0}")
	local n0 n1
	n0=$(awk '{print $4}' "$snap_dir/before")
	n1=$(cat "$snap_dir/end" 2>/dev/null || echo "$n0")
	echo "$jps $(awk -v c="$cores" -v s="$(((n1 - n0) / 1000000))" 'BEGIN {printf "%.2f", c * s / 1000}') $cost" |
		awk '{print $1, $3, $2, $4, $5}'
	clean
}

# The SQL ceiling's run, the same figures; its "system" is pgbench.
ceiling_run() { # n
	rm -f "$snap_dir"/*
	local jps
	# The C1 list is one blank: no batch-1 runs.
	jps=$(PATH=$wrap_path N100=$1 bash "$peers/sqlbench.sh" 1 update " " 4 2>/dev/null |
		awk -F'\t' '$1 == "sql" { print $7 }' | tail -1)
	# sqlbench counts the finished jobs in a statement of its own.
	local cost
	cost=$(after_run 1)
	set -- $cost
	echo "$jps $1 $(cat "$snap_dir/client" 2>/dev/null || echo nan) $2 $3"
	clean
}

compare() { # n rounds
	local n=$1 rounds=$2 r out="$BENCH_DIR/compare.tsv"
	[ -d "$NODE_DIR/node_modules/graphile-worker" ] && [ -d "$NODE_DIR/node_modules/pg-boss" ] ||
		{ echo "peers.sh: graphile-worker or pg-boss is missing; run $peers/setup_node.sh" >&2; exit 2; }
	write_config "$BENCH_DIR/pgjobd-r0.yaml" 0
	write_config "$BENCH_DIR/pgjobd-r7d.yaml" 7d
	local lang
	for lang in $PROCESS_LANGS; do write_config "$BENCH_DIR/pgjobd-$lang.yaml" 7d "$lang"; done
	wrappers
	: >"$out"
	clean
	local tab='\t'
	for r in $(seq "$rounds"); do
		printf "pgjobd, retention 0$tab%s\n" "$(one_run cmd "$BENCH_DIR/pgjobd-r0.yaml" "$n" | tr ' ' '\t')" >>"$out"
		printf "pgjobd, retention 7d$tab%s\n" "$(one_run cmd "$BENCH_DIR/pgjobd-r7d.yaml" "$n" | tr ' ' '\t')" >>"$out"
		for lang in $PROCESS_LANGS; do
			printf "pgjobd, retention 7d, $lang process handler$tab%s\n" "$(one_run cmd "$BENCH_DIR/pgjobd-$lang.yaml" "$n" | tr ' ' '\t')" >>"$out"
		done
		printf "graphile-worker ($graphile_cfg)$tab%s\n" "$(one_run graphile "$graphile_cfg" "$n" | tr ' ' '\t')" >>"$out"
		printf "pg-boss ($pgboss_cfg, poll 0.5 s)$tab%s\n" "$(one_run pgboss "$pgboss_cfg" "$n" | tr ' ' '\t')" >>"$out"
		printf "SQL ceiling, update on finish, 100/batch, 4 clients (system: pgbench)$tab%s\n" "$(ceiling_run "$n" | tr ' ' '\t')" >>"$out"
		echo "round $r of $rounds done" >&2
	done
	python3 - "$out" "$n" "$rounds" "$workers" "$concurrency" <<'PY'
import math, statistics, sys
path, n, rounds, workers, conc = sys.argv[1:]
n = int(n)
runs = {}
for line in open(path):
    f = line.rstrip('\n').split('\t')
    vals = []
    for v in f[1:6] + [''] * (6 - len(f)):
        try:
            vals.append(float(v))
        except ValueError:
            vals.append(float('nan'))
    runs.setdefault(f[0], []).append(vals)
def med(k, i, per=1.0):
    vs = [r[i] / per for r in runs[k] if not math.isnan(r[i])]
    return statistics.median(vs) if vs else float('nan')
g = next(med(k, 0) for k in runs if k.startswith('graphile'))
c = next(med(k, 0) for k in runs if k.startswith('SQL'))
print(f"{n} jobs, {rounds} rounds in turn; pgjobd: {workers} workers x {conc}")
print("| system | jobs/s median (min-max) | x graphile-worker | x SQL ceiling (update) "
      "| CPU s / 1,000 jobs: PostgreSQL | CPU s / 1,000 jobs: system | WAL B/job | transactions/job |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for k, rs in runs.items():
    j = [r[0] for r in rs if not math.isnan(r[0])]
    lo, hi = (min(j), max(j)) if j else (float('nan'),) * 2
    m = med(k, 0)
    print(f"| {k} | {m:,.0f} ({lo:,.0f}-{hi:,.0f}) | {m / g:.2f} | {m / c:.2f} "
          f"| {med(k, 1, n / 1000):.3f} | {med(k, 2, n / 1000):.3f} | {med(k, 3, n):,.0f} "
          f"| {med(k, 4, n):.3f} |")
print()
print("CPU: PostgreSQL's backends and helpers (the poller's backend included); the system's own "
      "processes (the harness's worker cores times the run; for the ceiling, pgbench). "
      "WAL: pg_current_wal_lsn() from the end of the harness's checkpoint to after the run, "
      "autovacuum included. Transactions: pg_stat_database xact_commit + xact_rollback over the "
      "same span, less the poller's polls and the measurement's own; autovacuum's included.")
if any("process handler" in k for k in runs):
    print("A process handler's copies run in sessions of their own (setsid), outside the process "
          "group the harness times: its system CPU is pgjobd's alone; tests/bench/process.sh "
          "reports the copies' CPU per job.")
if n < 100000:
    print("pg-boss fetches 5,000 jobs at a time: below about 100,000 jobs its jobs/s (from the first "
          "completion seen to the last) rests on a few fetches; the 200,000-job default is the one to quote.")
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
