#!/usr/bin/env bash
# Many processes against one database, and where their time goes
# (docs/performance.md, "Many processes").  Not in CI but its short form:
#
#   tests/bench/scale.sh [--jobs N] [--concurrency C] [--rounds R]
#                        [--configs "1x2 16x1 4x4 1x16"] [--warm] [--short]
#
# For each configuration IxW[:FILE] (I instances of W workers, every process with
# the same config, concurrency C per worker), in R interleaved rounds: a
# fresh schema, N no-op jobs queued (retention 7d), the instances started,
# the queue watched to empty.  Meanwhile a procedure in the server samples
# pg_stat_activity every 20 ms: per statement (the claim, the finish), the
# share of its active samples in each wait event, "CPU" for none (on 2
# cores, 16 backends that want the CPU show as CPU too), and for a sample
# that waits for a heavyweight lock, what the first session it waits for
# runs (pg_blocking_pids(): the claim, the finish or other, with that
# session's state and wait).  Per run it
# prints jobs/s, the machine's CPU time per job (all processes, from
# /proc/stat), WAL bytes per job, per statement its calls, mean time and
# rows per call from pg_stat_statements, per index of pgjob.jobs the
# entries read and heap rows fetched per job, and the samples and the
# lock waits' holders; then per
# configuration the median of its rounds against the first's.
#
# With --warm, the queue is paused while the instances start, and resumed
# once every worker has its row in pgjob.workers: the drain then runs with
# every process up (the machine's CPU counted from the resume).  Without
# it, instances that start late start inside the drain: the start of 16
# supervisors, their 16 workers and their connections is then part of
# what a drain of a few seconds is timed by.
#
# With SCALE_SETUP_SQL=FILE, psql runs FILE after each fresh schema's
# migrate (a trial: another index, a storage setting); a configuration's
# own :FILE runs after it, so that one run can set a trial beside the
# schema as it is ("16x1 16x1:/tmp/trial.sql").
set -euo pipefail
shopt -s inherit_errexit
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${PGJOBD_BUILD_DIR:-$root/build}" && pwd)

n=600000 conc=1000 rounds=1 configs="1x2 16x1 4x4 1x16" warm=0
while [ $# -gt 0 ]; do
	case $1 in
	--jobs) n=$2; shift ;;
	--concurrency) conc=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--configs) configs=$2; shift ;;
	--warm) warm=1 ;;
	--short) n=5000 conc=100 rounds=1 configs="1x2 2x1" ;;
	*) echo "usage: scale.sh [--jobs N] [--concurrency C] [--rounds R] [--configs \"IxW ...\"] [--warm] [--short]" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j"$(nproc)" --target pgjobd pgjob pgjobd_bench \
	pgjobd_bench_tool >/dev/null
dir="$build/bench-scale"
PGJOBD_TESTPG_DURABLE=1 \
	PGJOBD_TESTPG_OPTS="-c shared_preload_libraries=pg_stat_statements" \
	bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
pids='' sampler=''
# A run is a subshell ($(run ...)): what it started is found by its
# config's path, not by its variables.
cleanup() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	pkill -TERM -f -- "-c $dir/" 2>/dev/null || true
	[ -n "$sampler" ] && stop_sampler
	bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
}
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" "$@"; }
: >"$dir/pgjobd.log"

# The sampler: a procedure that commits after each sample, so that each
# reads pg_stat_activity afresh (a transaction keeps its first read).
# Its table is unlogged: no WAL counted against the jobs.
sql <<'SQL'
create extension if not exists pg_stat_statements;
create schema scale_bench;
create unlogged table scale_bench.samples (stmt text, wait text, blocker text);
-- Which of the worker's statements a session runs, by its text.
create function scale_bench.stmt(query text) returns text
language sql immutable as $$
	select case when query like 'with qa(name%' then 'claim'
		when query like 'with fd as%' then 'finish'
		else 'other' end
$$;
create procedure scale_bench.sample(n int) language plpgsql as $$
begin
	for i in 1..n loop
		insert into scale_bench.samples
		select scale_bench.stmt(query),
			coalesce(wait_event_type || ':' || wait_event, 'CPU'),
			case when wait_event_type = 'Lock' then (
				select scale_bench.stmt(b.query) || ' (' || b.state
					|| coalesce(', ' || b.wait_event, '') || ')'
				from pg_stat_activity b
				where b.pid = (pg_blocking_pids(a.pid))[1]) end
		from pg_stat_activity a
		where backend_type = 'client backend' and state = 'active'
			and pid <> pg_backend_pid()
			and query not like 'call scale_bench.%';
		commit;
		perform pg_sleep(0.02);
	end loop;
end
$$;
SQL
stop_sampler() {
	sql -c "select pg_cancel_backend(pid) from pg_stat_activity where query like 'call scale_bench.%'" >/dev/null
	wait "$sampler" 2>/dev/null || true
	sampler=
}

fresh_schema() {
	sql -c "drop schema if exists pgjob cascade" 2>/dev/null
	"$build/pgjob" -d "$db" migrate >/dev/null
	if [ -n "${SCALE_SETUP_SQL:-}" ]; then sql -f "$SCALE_SETUP_SQL" >/dev/null; fi
	if [ -n "${1:-}" ]; then sql -f "$1" >/dev/null; fi
}

cat >"$dir/scale.yaml" <<YAML
log: { level: warn }
retention: 7d
queues: { default: { concurrency: $conc } }
handlers:
  noop: { type: plugin, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench }
YAML

# jiffies the machine spent busy (user, nice, system, irq, softirq), and
# those the hypervisor gave to another guest (steal): a noisy neighbour
# shows there, not as work per job.
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
steal() { awk '/^cpu / {print $9}' /proc/stat; }
# jiffies the processes named $1 alive now have used (user and system):
# pgjobd's supervisors and workers, or the server's processes.  Between a
# read after the resume and one before the instances stop (a warm run)
# every such process is alive at both; a cold run's instances start after
# the first read, and their start counts.
proc_cpu() {
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } |
		awk -v c="($1)" '$2 == c {t += $14 + $15} END {print t + 0}'
}

# One run: prints its report, and "RATE" last.
run() { # instances workers [setup file]
	fresh_schema "${3:-}"
	sql -c "insert into pgjob.jobs (kind, payload) select 'noop', jsonb_build_object('id', i) from generate_series(1, $n) i" \
		-c "vacuum analyze pgjob.jobs" -c "checkpoint" >/dev/null
	sed "1i workers: $2" "$dir/scale.yaml" >"$dir/run.yaml"
	sql -c "select pg_stat_statements_reset()" -c "select pg_stat_reset()" \
		-c "truncate scale_bench.samples" >/dev/null
	sql -c "call scale_bench.sample(100000)" >/dev/null 2>&1 &
	sampler=$!
	local l0 c0 c1 s0 s1 d0 d1 p0 p1 wal before
	l0=$(sql -c "select pg_current_wal_lsn()")
	rm -f "$dir/ready"
	PGJOBD_BENCH_READY="$dir/ready" "$build/pgjobd_bench_tool" wait "$db" 900 >"$dir/wait.out" &
	local watch=$!
	until [ -e "$dir/ready" ] || ! kill -0 "$watch" 2>/dev/null; do sleep 0.01; done
	[ "$warm" = 1 ] && sql -c "select pgjob.pause('default')" >/dev/null
	c0=$(busy) s0=$(steal) d0=$(proc_cpu pgjobd) p0=$(proc_cpu postgres)
	before=$(wc -l <"$dir/pgjobd.log")
	pids=
	for _ in $(seq "$1"); do
		"$build/pgjobd" -c "$dir/run.yaml" -d "$db" 2>>"$dir/pgjobd.log" &
		pids="$pids $!"
	done
	if [ "$warm" = 1 ]; then
		local waited=0
		until [ "$(sql -c "select count(*) from pgjob.workers")" -ge $(($1 * $2)) ]; do
			waited=$((waited + 1))
			[ "$waited" -le 1200 ] || { echo "scale: $(sql -c "select count(*) from pgjob.workers") of $(($1 * $2)) workers registered after 60 s: $dir/pgjobd.log" >&2; exit 1; }
			sleep 0.05
		done
		sleep 0.5 # past their start: connected, prepared, waiting
		c0=$(busy) s0=$(steal) d0=$(proc_cpu pgjobd) p0=$(proc_cpu postgres)
		sql -c "select pgjob.resume('default')" >/dev/null
	fi
	wait "$watch"
	c1=$(busy) s1=$(steal) d1=$(proc_cpu pgjobd) p1=$(proc_cpu postgres)
	wal=$(sql -c "select round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$l0') / $n)")
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	pids=
	stop_sampler
	sleep 0.6 # the counters reach the statistics views
	local first end rate errs
	read -r first end _ <<<"$(sed 's/[a-z_]*=//g' "$dir/wait.out")"
	rate=$(awk -v n="$n" -v f="$first" -v e="$end" 'BEGIN {printf "%.0f", n / ((e - f) / 1e6)}')
	errs=$(tail -n +"$((before + 1))" "$dir/pgjobd.log" | grep -c -E 'level=(error|warn)' || true)
	echo "## $1 x $2${3:+ ($3)}, concurrency $conc each: $rate jobs/s"
	awk -v c=$((c1 - c0)) -v s=$((s1 - s0)) -v n="$n" -v hz="$(getconf CLK_TCK)" -v w="$wal" -v e="$errs" 'BEGIN {
		printf "machine CPU %.1f s, %.1f us/job (steal %.1f s); WAL %d B/job; log warnings/errors %d\n",
			c / hz, c / hz * 1e6 / n, s / hz, w, e }'
	awk -v d=$((d1 - d0)) -v p=$((p1 - p0)) -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN {
		printf "CPU us/job: pgjobd processes %.2f, PostgreSQL processes %.2f\n",
			d / hz * 1e6 / n, p / hz * 1e6 / n }'
	echo "statement | calls | mean ms | rows/call | buffers hit/call"
	sql -F ' | ' -c "select case when query like 'with qa(name%' then 'claim'
			when query like 'with fd as%' then 'finish'
			else left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 24) end,
			calls, round(mean_exec_time::numeric, 2),
			round(rows::numeric / calls, 1),
			round(shared_blks_hit::numeric / calls)
		from pg_stat_statements
		where calls >= 20 and query not like '%scale_bench%'
		order by total_exec_time desc limit 4"
	echo "index | entries read/job | heap rows fetched/job"
	sql -F ' | ' -c "select indexrelname, round(idx_tup_read::numeric / $n, 2),
			round(idx_tup_fetch::numeric / $n, 2)
		from pg_stat_user_indexes
		where schemaname = 'pgjob' and relname = 'jobs' and idx_scan > 0
		order by idx_tup_read desc"
	echo "statement | wait event | share of its active samples"
	sql -F ' | ' -c "select stmt, wait, share || ' %' from (
			select stmt, wait, count(*) as k, round(100.0 * count(*)
				/ sum(count(*)) over (partition by stmt), 1) as share
			from scale_bench.samples where stmt <> 'other'
			group by stmt, wait) s
		where share >= 1 order by stmt, k desc"
	echo "statement | wait event | what the session it waits for runs (state, its wait) | share of its lock waits"
	sql -F ' | ' -c "select stmt, wait, blocker, share || ' %' from (
			select stmt, wait, blocker, count(*) as k, round(100.0 * count(*)
				/ sum(count(*)) over (partition by stmt), 1) as share
			from scale_bench.samples
			where stmt <> 'other' and wait like 'Lock:%'
			group by stmt, wait, blocker) s
		where share >= 2 order by stmt, k desc"
	echo
	echo "RATE $rate"
}

echo "machine: $(nproc) cores; jobs=$n concurrency=$conc rounds=$rounds configs=$configs"
# A first drain on a new server runs slow (2026-12-03: 49,987 and 50,187
# jobs/s where the day's others ran 58,000-61,000): one of a sixth of the
# jobs, not counted, warms it.
if [ "$n" -ge 60000 ]; then
	(n=$((n / 6)); run 1 2 "" >/dev/null)
fi
declare -A rates
for _ in $(seq "$rounds"); do
	for cfg in $configs; do
		shape=${cfg%%:*} setup=
		[ "$shape" != "$cfg" ] && setup=${cfg#*:}
		out=$(run "${shape%x*}" "${shape#*x}" "$setup")
		sed '$d' <<<"$out"
		rates[$cfg]="${rates[$cfg]:-} $(tail -1 <<<"$out" | cut -d' ' -f2)"
	done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
ref=
echo "| configuration | jobs/s median (rounds) | x the first |"
echo "| --- | ---: | ---: |"
for cfg in $configs; do
	m=$(median <<<"${rates[$cfg]}")
	[ -z "$ref" ] && ref=$m
	shape=${cfg%%:*}
	echo "| ${shape%x*} x ${shape#*x}${cfg#"$shape"} | $m (${rates[$cfg]# }) | $(awk -v a="$m" -v b="$ref" 'BEGIN {printf "%.2f", a / b}') |"
done
# What must hold: every run logged no error (the jobs are all done, or the
# watch would have timed out and failed the script).
if grep -q -E 'level=error' "$dir/pgjobd.log"; then
	echo "scale: pgjobd logged errors ($dir/pgjobd.log)" >&2
	exit 1
fi
