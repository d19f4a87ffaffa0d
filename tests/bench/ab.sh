#!/usr/bin/env bash
# Two builds of pgjobd side by side on one PostgreSQL: the no-op plugin, N
# jobs, the default retention (done jobs kept), 2 workers, rounds that
# alternate A and B so that both meet the same machine.  Each build has a
# database of its own (its own schema version), at default durability.
#
#   tests/bench/ab.sh BUILD_A BUILD_B [N] [ROUNDS]    (200000 jobs, 3 rounds)
#
# A build folder of another commit: git worktree add /tmp/a REV; cmake -S
# /tmp/a -B /tmp/a/build && make -C /tmp/a/build pgjobd pgjob pgjobd_example
# pgjobd_bench.
# Prints per round and build: jobs/s between the first and the last finish,
# WAL bytes per job, and for the claim and the finish their time on the
# server and the buffers they read, per job (pg_stat_statements), and
# pgjobd's own CPU time per job (its processes' user and system time).  The
# example plugin returns a result for every job.  With AB_FAIL_FIRST=1 the
# bench plugin runs them instead, and every job fails its first attempt
# (retried at once, done at its second): the ends that stay in pgjob.jobs,
# and their attempt history.  With AB_RETENTION=R (0, 1h, ...) both builds
# run with that retention, and the rate is timed by
# `pgjobd_bench_tool wait` (from the first poll that saw a job running to
# the first that saw none left, as scale.sh does): at retention 0 no
# finished row is left to time it by.  With AB_LIMITS="per_key_concurrency:
# 20" (any flow-control settings of docs/queues.md) the queue has them, and
# with AB_KEYS=K the jobs' limit_key is one of K keys; the claim's figures
# are then those of pgjob.claim_limited().  With AB_WAITING=N, N workflow
# steps wait beside the jobs (after a parent that failed, as the suite's
# "workflows on but idle" row).  With AB_STATEMENTS=1 the server tracks
# nested statements too (pg_stat_statements.track = all) and each round
# prints its 14 costliest, in server time (executing, then planning: a
# statement planned at each call shows it) and buffers a job.  With
# AB_CHAIN=1 the N jobs are a chain instead, each enqueued after the one
# before (pgjob.enqueue(depends_on)): one runs at a time, and each round
# also prints the hop, from a parent's finish to its child's start
# (mean, p50, p99), as the suite's chain row measures it.  AB_SQL_A and
# AB_SQL_B run in that build's database after its migrate: a change of
# the schema measured before it is written (the same build twice).  With
# AB_FANOUT=1 they are a fan-out and its fan-in, as the suite's row: one
# job, N - 2 children after it, one job after them all; each round also
# prints when the first and the last child started after the parent's
# end, and the fan-in after its last parent's.  Run it on an idle machine
# (docs/performance.md).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ $# -ge 2 ] || { echo "usage: ab.sh BUILD_A BUILD_B [N] [ROUNDS]" >&2; exit 2; }
declare -A build=([a]=$(cd "$1" && pwd) [b]=$(cd "$2" && pwd))
n=${3:-200000}
rounds=${4:-3}
dir=$(mktemp -d /tmp/pgjobd-ab.XXXXXX)
track=top
planning=off
[ "${AB_STATEMENTS:-0}" = 1 ] && track=all planning=on
PGJOBD_TESTPG_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=$track -c pg_stat_statements.track_planning=$planning" \
	PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir/pg" >/dev/null
trap 'bash "$root/scripts/testpg.sh" stop "$dir/pg" >/dev/null; rm -rf "$dir"' EXIT
base=$(cat "$dir/pg/conninfo")
declare -A db
plugin=pgjobd_example payload=null
if [ "${AB_FAIL_FIRST:-0}" = 1 ]; then
	plugin=pgjobd_bench payload="'{\"fail_first\": true}'"
fi
for v in a b; do
	psql -X -q "$base" -c "create database ab_$v"
	db[$v]=${base/dbname=postgres/dbname=ab_$v}
	psql -X -q "${db[$v]}" -c "create extension pg_stat_statements"
	"${build[$v]}/pgjob" --database "${db[$v]}" migrate >/dev/null
	# AB_SQL_A, AB_SQL_B: SQL run in that build's database after its
	# migrate (a schema change tried before it is written).
	sqlv=AB_SQL_${v^^}
	[ -n "${!sqlv:-}" ] && psql -X -q "${db[$v]}" -c "${!sqlv}"
	cat >"$dir/$v.yaml" <<YAML
workers: 2
log: { level: warn }
queues: { default: { concurrency: 1000${AB_LIMITS:+, $AB_LIMITS} } }
${AB_RETENTION:+retention: $AB_RETENTION}
handlers:
  noop: { type: plugin, library: "${build[$v]}/$plugin.so", symbol: $plugin }
YAML
done
key=null
if [ -n "${AB_KEYS:-}" ]; then
	key="'k' || (i % ${AB_KEYS})"
fi
for r in $(seq "$rounds"); do
	for v in a b; do
		if [ "${AB_CHAIN:-0}" = 1 ]; then
			fill="do \$\$ declare p bigint; begin p := pgjob.enqueue('noop');
				for i in 2 .. $n loop p := pgjob.enqueue('noop', depends_on => array[p]); end loop; end \$\$"
		elif [ "${AB_FANOUT:-0}" = 1 ]; then
			fill="do \$\$ declare r bigint; ids bigint[]; begin r := pgjob.enqueue('noop');
				select array_agg(pgjob.enqueue('noop', depends_on => array[r])) into ids from generate_series(1, $n - 2);
				perform pgjob.enqueue('noop', depends_on => ids); end \$\$"
		else
			fill="insert into pgjob.jobs (kind, payload, limit_key) select 'noop', coalesce($payload::jsonb, '{}'), $key from generate_series(1, $n) i"
		fi
		psql -X -q "${db[$v]}" -c "truncate pgjob.jobs, pgjob.jobs_done, pgjob.job_deps cascade" \
			-c "$fill" \
			-c "do \$\$ declare r bigint; begin
				if ${AB_WAITING:-0} > 0 then
					r := pgjob.enqueue('noop');
					perform pgjob.enqueue('noop', depends_on => array[r], on_parent_failure => 'wait')
					  from generate_series(1, ${AB_WAITING:-0});
					update pgjob.jobs set state = 'dead', finished_at = now(), last_error = 'bench' where id = r;
				end if; end \$\$" \
			-c "vacuum analyze pgjob.jobs" -c "checkpoint" \
			-c "select pg_stat_statements_reset()" >/dev/null
		w0=$(psql -X -A -t "${db[$v]}" -c "select pg_current_wal_lsn()")
		if [ -n "${AB_RETENTION:-}" ]; then
			rm -f "$dir/ready"
			PGJOBD_BENCH_READY="$dir/ready" "${build[$v]}/pgjobd_bench_tool" wait "${db[$v]}" 900 >"$dir/wait.out" &
			watch=$!
			until [ -e "$dir/ready" ] || ! kill -0 "$watch" 2>/dev/null; do sleep 0.01; done
		fi
		"${build[$v]}/pgjobd" -c "$dir/$v.yaml" -d "${db[$v]}" 2>>"$dir/$v.log" &
		pid=$!
		if [ -n "${AB_RETENTION:-}" ]; then
			wait "$watch"
			read -r first end _ <<<"$(sed 's/[a-z_]*=//g' "$dir/wait.out")"
			span=$(awk -v f="$first" -v e="$end" 'BEGIN {print (e - f) / 1e6}')
		else
			# A chain's steps wait until their parent is done.
			left="state not in ('done', 'waiting', 'dead')"
			[ "${AB_CHAIN:-0}${AB_FANOUT:-0}" != 00 ] && left="state not in ('done', 'dead')"
			until [ "$(psql -X -A -t "${db[$v]}" -c "select count(*) from pgjob.jobs where $left")" = 0 ]; do
				sleep 0.5 # the count reads the whole table: not too often
			done
			span=$(psql -X -A -t "${db[$v]}" -c "select extract(epoch from max(finished_at) - min(finished_at)) from pgjob.all_jobs where state = 'done'")
		fi
		wal=$(psql -X -A -t "${db[$v]}" -c "select pg_wal_lsn_diff(pg_current_wal_lsn(), '$w0')")
		# pgjobd's own CPU (the supervisor and its workers, user and
		# system), before they exit.
		ticks=$(for p in "$pid" $(ps -o pid= --ppid "$pid"); do
			awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || true
		done | awk '{t += $1} END {print t + 0}')
		kill -TERM "$pid"
		wait "$pid" || true
		# Server time (us) and buffers read per job: claim, then finish.
		stmts=$(psql -X -A -t -F ' ' "${db[$v]}" -c "select
			coalesce(sum(total_exec_time) filter (where query like 'with qa(name%' or query like '%pgjob.claim_limited(%'), 0) * 1000 / $n,
			coalesce(sum(shared_blks_hit + shared_blks_read) filter (where query like 'with qa(name%' or query like '%pgjob.claim_limited(%'), 0)::float8 / $n,
			coalesce(sum(total_exec_time) filter (where query like 'with fd as%'), 0) * 1000 / $n,
			coalesce(sum(shared_blks_hit + shared_blks_read) filter (where query like 'with fd as%'), 0)::float8 / $n
			from pg_stat_statements")
		if [ "$track" = all ]; then
			psql -X -A -t -F ' | ' "${db[$v]}" -c "select round((total_exec_time * 1000 / $n)::numeric, 2) as us_per_job,
				round((total_plan_time * 1000 / $n)::numeric, 2) as plan_us_per_job, calls,
				round(((shared_blks_hit + shared_blks_read)::float8 / $n)::numeric, 2) as buffers_per_job,
				left(regexp_replace(query, '\s+', ' ', 'g'), 110)
				from pg_stat_statements order by total_exec_time + total_plan_time desc limit 14" | sed "s/^/  $v: /"
		fi
		awk -v v="$v" -v r="$r" -v n="$n" -v sp="$span" -v w="$wal" -v s="$stmts" \
			-v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN {
			split(s, x, " ")
			printf "round %d  %s  jobs/s %.0f  WAL B/job %.0f  claim %.1f us %.1f buffers  finish %.1f us %.1f buffers  pgjobd CPU %.2f us\n",
				r, toupper(v), n / sp, w / n, x[1], x[2], x[3], x[4], t * 1e6 / hz / n }'
		if [ "${AB_CHAIN:-0}" = 1 ]; then
			psql -X -A -t "${db[$v]}" -c "select format('round %s  %s  hop mean %s ms  p50 %s ms  p99 %s ms', $r, upper('$v'),
				round(avg(x) * 1000, 3), round((percentile_cont(0.5) within group (order by x) * 1000)::numeric, 3),
				round((percentile_cont(0.99) within group (order by x) * 1000)::numeric, 3))
				from (select extract(epoch from c.attempted_at - p.finished_at) as x from pgjob.job_deps d
				join pgjob.all_jobs p on p.id = d.parent join pgjob.all_jobs c on c.id = d.child) h"
		fi
		if [ "${AB_FANOUT:-0}" = 1 ]; then
			psql -X -A -t "${db[$v]}" -c "with a as (select * from pgjob.all_jobs),
				p as (select * from a order by id limit 1), s as (select * from a order by id desc limit 1)
				select format('round %s  %s  fan-out: first child %s ms, last %s ms after the parent; fan-in %s ms after its last parent', $r, upper('$v'),
				round(extract(epoch from min(c.attempted_at) - p.finished_at) * 1000, 2),
				round(extract(epoch from max(c.attempted_at) - p.finished_at) * 1000, 2),
				round(extract(epoch from s.attempted_at - max(c.finished_at)) * 1000, 2))
				from p, s, a c where c.id > p.id and c.id < s.id group by p.finished_at, s.attempted_at"
		fi
	done
done
