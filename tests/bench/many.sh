#!/usr/bin/env bash
# Many queues and kinds (docs/performance.md, "Many queues and kinds").
# Not in CI:
#
#   tests/bench/many.sh [--jobs N] [--queues Q] [--kinds K] [--workers W]
#                       [--concurrency C] [--queue-concurrency QC]
#                       [--instances I] [--subset S] [--rounds R]
#                       [--rows "one many shared apart alone"] [--short]
#
# On a private PostgreSQL at default durability (fsync on), retention 7d,
# no-op jobs (the bench plugin), in R rounds, each row in turn with a fresh
# schema:
#
#   one     one queue (concurrency C), one kind, one instance of W workers,
#           N jobs: the reference;
#   many    Q queues (concurrency QC each) and K kinds, kind i in queue
#           i mod Q, one instance of W workers with every handler; N jobs,
#           job i of kind i mod K, so every queue has jobs;
#   shared  I instances of one worker, instance j with the S kinds
#           j*S .. j*S+S-1 only, all in one queue (concurrency C); N jobs
#           over the I*S kinds in one table;
#   alone   one such instance with its S kinds, and only its N/I jobs in
#           the table: what "shared" is compared with;
#   apart   as shared, but each instance's kinds in a queue of their own:
#           the same processes sharing the same cores, without the other
#           instances' jobs between a claim's own in the claim's index
#           (what shared's claims pay for the others' jobs is the
#           difference).
#
# Per row: jobs/s once every worker is up (the jobs that ended after the
# last worker's row appeared in pgjob.workers, over the time from then to
# the last end: a worker publishes its queues before, and a thousand of
# them take a while), and over the whole drain (from the first job's start
# to the last one's end), per instance for "shared" (whole drain); the
# claim's and the finish's calls, mean time, time per job, and the claim's
# buffers per job (pg_stat_statements); index entries read per job
# (pg_stat_user_indexes);
# this server's CPU per job (its processes in /proc, start included).
# Then per row the median of its rounds and its ratio to "one".  Figures
# are printed, never asserted.
set -euo pipefail
shopt -s inherit_errexit
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${PGJOBD_BUILD_DIR:-$root/build}" && pwd)

n=100000 nq=1000 nk=10000 workers=2 conc=1000 qconc=10 inst=8 subset=100
rounds=1 rows="one many shared apart alone"
usage="usage: many.sh [--jobs N] [--queues Q] [--kinds K] [--workers W] [--concurrency C] [--queue-concurrency QC] [--instances I] [--subset S] [--rounds R] [--rows \"one many shared apart alone\"] [--short]"
while [ $# -gt 0 ]; do
	case $1 in
	--jobs) n=$2; shift ;;
	--queues) nq=$2; shift ;;
	--kinds) nk=$2; shift ;;
	--workers) workers=$2; shift ;;
	--concurrency) conc=$2; shift ;;
	--queue-concurrency) qconc=$2; shift ;;
	--instances) inst=$2; shift ;;
	--subset) subset=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--rows) rows=$2; shift ;;
	--short) n=5000 nq=50 nk=200 inst=2 subset=10 ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j"$(nproc)" --target pgjobd pgjob pgjobd_bench \
	pgjobd_bench_tool >/dev/null
dir="$build/bench-many"
PGJOBD_TESTPG_DURABLE=1 \
	PGJOBD_TESTPG_OPTS="-c shared_preload_libraries=pg_stat_statements" \
	bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
pids=''
cleanup() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
}
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" "$@"; }
sql -c "create extension if not exists pg_stat_statements" >/dev/null
: >"$dir/pgjobd.log"
plugin="library: \"$build/pgjobd_bench.so\", symbol: pgjobd_bench"

# The CPU jiffies (user and system) of this server's processes: the
# postmaster and its children, not another PostgreSQL on the machine.
pm=$(head -1 "$(cat "$dir/datadir")/postmaster.pid")
# With "pid (comm) " cut off a line of /proc/PID/stat, $2 is the ppid and
# $12 $13 are utime and stime.
pg_cpu() {
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } |
		awk -v pm="$pm" '{sub(/^.*\) /, "")} $2 == pm {t += $12 + $13}
			END {print t + 0}'
}
pm_cpu() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$pm/stat"; }

# A config file $1 of $2 workers, the queues $3 (YAML lines) and the
# handlers on stdin (YAML lines).
config() {
	{
		echo "workers: $2"
		echo "log: { level: warn }"
		echo "retention: 7d"
		echo "queues:"
		printf '%s\n' "$3"
		echo "handlers:"
		cat
	} >"$1"
}
# Handlers for kinds k$1 .. k$2, kind i in queue q(i mod $3), or in
# "default" when $3 is 0.
handlers() {
	awk -v a="$1" -v b="$2" -v nq="$3" -v p="$plugin" 'BEGIN {
		for (i = a; i <= b; i++)
			printf "  k%d: { type: plugin, queue: %s, %s }\n", i,
				(nq > 0 ? "q" (i % nq) : "default"), p }'
}

fresh_schema() {
	sql -c "drop schema if exists pgjob cascade" 2>/dev/null
	"$build/pgjob" -d "$db" migrate >/dev/null
}

# One run of a row: prints its report, and "RATE r" last.
run() { # row
	local row=$1 jobs=$n cfgs=() ninst=1 kinds_sql queue_sql
	fresh_schema
	case $row in
	one)
		config "$dir/one.yaml" "$workers" "  default: { concurrency: $conc }" <<<"  k0: { type: plugin, $plugin }"
		cfgs=("$dir/one.yaml")
		kinds_sql="'k0'" queue_sql="'default'" ;;
	many)
		handlers 0 $((nk - 1)) "$nq" |
			config "$dir/many.yaml" "$workers" "$(awk -v nq="$nq" -v c="$qconc" 'BEGIN {
				for (i = 0; i < nq; i++) printf "  q%d: { concurrency: %d }\n", i, c }')"
		cfgs=("$dir/many.yaml")
		kinds_sql="'k' || (i % $nk)" queue_sql="'q' || (i % $nk % $nq)" ;;
	shared | alone)
		ninst=$inst
		[ "$row" = alone ] && ninst=1 jobs=$((n / inst))
		for j in $(seq 0 $((ninst - 1))); do
			handlers $((j * subset)) $((j * subset + subset - 1)) 0 |
				config "$dir/sub$j.yaml" 1 "  default: { concurrency: $conc }"
			cfgs+=("$dir/sub$j.yaml")
		done
		kinds_sql="'k' || (i % $((ninst * subset)))" queue_sql="'default'" ;;
	apart)
		# As shared, but each instance's kinds in a queue of their own
		# (s0, s1, ...): the same processes on the same cores, and no
		# other instance's jobs between a claim's own in jobs_claim_idx.
		ninst=$inst
		for j in $(seq 0 $((ninst - 1))); do
			handlers $((j * subset)) $((j * subset + subset - 1)) 0 |
				sed "s/queue: default/queue: s$j/" |
				config "$dir/apart$j.yaml" 1 "  s$j: { concurrency: $conc }"
			cfgs+=("$dir/apart$j.yaml")
		done
		kinds_sql="'k' || (i % $((ninst * subset)))"
		queue_sql="'s' || (i % $((ninst * subset)) / $subset)" ;;
	esac
	sql -c "insert into pgjob.jobs (kind, queue, payload) select $kinds_sql, $queue_sql, jsonb_build_object('id', i) from generate_series(1, $jobs) i" \
		-c "vacuum analyze pgjob.jobs" -c "checkpoint" >/dev/null
	sql -c "select pg_stat_statements_reset()" -c "select pg_stat_reset()" >/dev/null
	local c0 c1 before
	c0=$(($(pg_cpu) + $(pm_cpu)))
	before=$(wc -l <"$dir/pgjobd.log")
	rm -f "$dir/ready"
	PGJOBD_BENCH_READY="$dir/ready" "$build/pgjobd_bench_tool" wait "$db" 1800 >"$dir/wait.out" &
	local watch=$!
	until [ -e "$dir/ready" ] || ! kill -0 "$watch" 2>/dev/null; do sleep 0.01; done
	pids=
	for f in "${cfgs[@]}"; do
		"$build/pgjobd" -c "$f" -d "$db" 2>>"$dir/pgjobd.log" &
		pids="$pids $!"
	done
	# When every worker is up (its row in pgjob.workers: it published
	# its queues first, which with a thousand queues takes a while), on
	# the server's clock.
	local nw=$((ninst * workers)) up
	case $row in shared | alone | apart) nw=$ninst ;; esac
	rm -f "$dir/up"
	(until [ "$(sql -c "select count(*) from pgjob.workers")" -ge "$nw" ]; do
		kill -0 "$watch" 2>/dev/null || exit 0
		sleep 0.05
	done
	sql -c "select now()" >"$dir/up") &
	up=$!
	wait "$watch"
	wait "$up" || true
	c1=$(($(pg_cpu) + $(pm_cpu)))
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	pids=
	sleep 0.6 # the counters reach the statistics views
	local rate errs
	local whole t
	whole=$(sql -c "select round($jobs / extract(epoch from max(finished_at) - min(attempted_at))) from pgjob.all_jobs")
	# The rate with every worker up: the jobs that ended after that, over
	# the time from then to the last end; the whole drain's if it ended
	# before every worker was up.
	t=$(cat "$dir/up" 2>/dev/null || true)
	rate=$whole
	if [ -n "$t" ]; then
		rate=$(sql -c "select coalesce(round(count(*) / nullif(extract(epoch from max(finished_at) - '$t'::timestamptz), 0)), $whole)
			from pgjob.all_jobs where finished_at > '$t'::timestamptz")
	fi
	errs=$(tail -n +"$((before + 1))" "$dir/pgjobd.log" | grep -c -E 'level=(error|warn)' || true)
	echo "## $row: $jobs jobs, $rate jobs/s with every worker up, $whole jobs/s the whole drain (loaded unless the machine was quiet)"
	awk -v c=$((c1 - c0)) -v n="$jobs" -v hz="$(getconf CLK_TCK)" -v e="$errs" 'BEGIN {
		printf "PostgreSQL CPU %.1f us/job (the instances start included); log warnings/errors %d\n",
			c / hz * 1e6 / n, e }'
	echo "claim: calls | mean ms | ms/job | us/job | buffers hit/job"
	sql -F ' | ' -c "select sum(calls), round((sum(total_exec_time) / sum(calls))::numeric, 2),
			round((sum(total_exec_time) / $jobs)::numeric, 4),
			round((sum(total_exec_time) * 1000 / $jobs)::numeric, 1),
			round(sum(shared_blks_hit)::numeric / $jobs, 2)
		from pg_stat_statements where query like 'with qa(name%'"
	echo "finish: calls | mean ms | us/job"
	sql -F ' | ' -c "select sum(calls), round((sum(total_exec_time) / sum(calls))::numeric, 2),
			round((sum(total_exec_time) * 1000 / $jobs)::numeric, 1)
		from pg_stat_statements where query like 'with fd as%'"
	echo "index | entries read/job"
	sql -F ' | ' -c "select indexrelname, round(idx_tup_read::numeric / $jobs, 2)
		from pg_stat_user_indexes
		where schemaname = 'pgjob' and relname = 'jobs' and idx_tup_read > 0
		order by idx_tup_read desc limit 3"
	if [ "$row" = shared ] || [ "$row" = apart ]; then
		echo "instance | kinds | jobs | jobs/s"
		sql -F ' | ' -c "select g, 'k' || (g * $subset) || '..k' || (g * $subset + $subset - 1),
				count(*), round(count(*) / extract(epoch from max(finished_at) - min(attempted_at)))
			from (select substr(kind, 2)::int / $subset as g, finished_at, attempted_at
				from pgjob.all_jobs) s group by g order by g"
	fi
	echo
	echo "RATE $rate"
}

echo "machine: $(nproc) cores; jobs=$n queues=$nq kinds=$nk workers=$workers concurrency=$conc queue-concurrency=$qconc instances=$inst subset=$subset rounds=$rounds"
declare -A rates
for _ in $(seq "$rounds"); do
	for row in $rows; do
		out=$(run "$row")
		sed '$d' <<<"$out"
		rates[$row]="${rates[$row]:-} $(tail -1 <<<"$out" | cut -d' ' -f2)"
	done
done
median() { tr ' ' '\n' | { grep . || true; } | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
ref=$(median <<<"${rates[one]:-}")
echo "| row | jobs/s median (rounds) | x one |"
echo "| --- | ---: | ---: |"
for row in $rows; do
	m=$(median <<<"${rates[$row]}")
	echo "| $row | $m (${rates[$row]# }) | $(awk -v a="$m" -v b="${ref:-0}" 'BEGIN {if (b > 0) printf "%.2f", a / b; else printf "-"}') |"
done
