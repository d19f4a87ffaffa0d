#!/usr/bin/env bash
# The web console's pages with a million jobs (docs/performance.md, "The
# web console"):
#
#   tests/bench/web.sh [--jobs N] [--runs N]
#
# It starts its own PostgreSQL (scripts/testpg.sh), migrates it, inserts N
# jobs (1,000,000) with one INSERT ... SELECT from generate_series, in a
# mix of states by id: 85 % done, 3 % dead (each with two failed attempts
# and its dead one in pgjob.attempts), 2 % cancelled, 4 % available and
# due, 3 % scheduled, 1 % failed and waiting for their retry, 2 % running
# with leases; five queues, twenty kinds, payloads of about 100 bytes, the
# first 10,000 jobs in 1,000 workflows of 10 chained steps; created over the
# last 50 minutes and finished a second after.  Then VACUUM ANALYZE, as
# autovacuum would have done on a table that size (the visibility map lets
# the counts read the indexes alone), and a pgjobd of 2 workers that serve
# only a queue of their own, so that their heartbeats, duties and
# published schedules are there as in production and none of the jobs
# move.
#
# Each page's API call (src/web/api.c) is timed RUNS times (50) after one
# warm-up by pgjobd_bench_web (tests/bench/web_bench.c), on one connection
# set up as pgjob web's: p50, p95 and max in ms, and the answer's size.
# jobs/count is asked exact once by a bulk action's confirmation, and with
# estimate=1 by a filtered jobs page at each refresh (past 300,000 rows,
# the planner's estimate).  A filtered page that is not full asks /api/jobs
# again from searched_to: each call here is one of those.  Figures are
# printed, never asserted.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}

jobs=1000000 runs=50
while [ $# -gt 0 ]; do
	case $1 in
	--jobs) jobs=$2; shift ;;
	--runs) runs=$2; shift ;;
	*) echo "usage: web.sh [--jobs N] [--runs N]" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j2 --target pgjobd pgjob pgjobd_bench_web >/dev/null
dir="$build/bench-web"
bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
daemon=
cleanup() {
	if [ -n "$daemon" ]; then
		kill -TERM "$daemon" 2>/dev/null || true
		wait "$daemon" 2>/dev/null || true
	fi
	bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
}
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql "$db" -X -q -At -v ON_ERROR_STOP=1 "$@"; }

"$build/pgjob" -d "$db" migrate >/dev/null
start=$(date +%s.%N)
sql -v n="$jobs" <<'SQL'
insert into pgjob.workflows (id, name, steps, created_at)
select w, 'nightly-' || w, 10, now() - interval '50 minutes'
  from generate_series(1, 1000) w;
insert into pgjob.jobs (id, queue, kind, payload, priority, run_at, state,
	attempts, max_attempts, locked_by, locked_until, lease_token,
	last_error, created_at, finished_at, attempted_at, workflow_id, step,
	last_wall_ms)
select i,
	(array['default', 'email', 'reports', 'billing', 'media'])[1 + i % 5],
	'kind' || (i % 20),
	jsonb_build_object('user', i, 'email', 'user' || i || '@example.com',
		'note', md5(i::text)),
	0,
	case when m between 94 and 96 or m = 99
		then now() + (i % 3600) * interval '1 second'
		else c end,
	case when m < 85 then 'done' when m < 88 then 'dead'
		when m < 90 then 'cancelled' when m < 97 or m = 99
		then 'available' else 'running' end,
	case when m between 85 and 87 then 3
		when m in (97, 98, 99) or m < 85 then 1 else 0 end,
	3,
	case when m < 88 or m in (97, 98) then 'bench-' || (i % 4) || ':' || (i % 8 + 1) end,
	case when m in (97, 98) then now() + interval '5 minutes' end,
	case when m < 88 or m in (97, 98, 99) then 1 else 0 end,
	case when m between 85 and 87 or m = 99
		then 'exit status 1: upstream said ' || md5(i::text) end,
	c,
	case when m < 90 then c + interval '1 second' end,
	case when m < 88 or m in (97, 98, 99) then c + interval '10 ms' end,
	case when i <= 10000 then (i - 1) / 10 + 1 end,
	case when i <= 10000 then 'step' || ((i - 1) % 10) end,
	case when m < 85 then 990 end
  from generate_series(1, :n) i,
	lateral (select i % 100 as m,
		now() - (:n - i) * interval '3 ms' as c) x;
\o /dev/null
select setval(pg_get_serial_sequence('pgjob.jobs', 'id'), :n);
\o
insert into pgjob.job_deps (parent, child, resolved)
select i, i + 1, 'done' from generate_series(1, 10000) i where i % 10 <> 0;
insert into pgjob.attempts (job_id, attempt, token, started_at, finished_at,
	worker, outcome, status, error, wall_ms)
select j.id, a, a, j.created_at, j.created_at + interval '1 second',
	'bench-1:' || a, case when a = 3 then 'dead' else 'failed' end, 1,
	'exit status 1: upstream said ' || md5(j.id::text), 1000
  from pgjob.jobs j, generate_series(1, 3) a where j.state = 'dead';
vacuum analyze;
SQL
load=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.0f", e - s}')

# A pgjobd whose workers serve a queue of their own, with a schedule.
cat >"$dir/web.yaml" <<EOF
database: { conninfo: "$db" }
workers: 2
queues: { idle: {} }
schedules:
  report: { cron: "0 3 * * *", kind: none }
handlers:
  none: { type: exec, queue: idle, command: [/bin/true] }
EOF
"$build/pgjobd" -c "$dir/web.yaml" >"$dir/pgjobd.log" 2>&1 &
daemon=$!
for _ in $(seq 1 100); do
	[ "$(sql -c 'select count(*) from pgjob.workers')" = 2 ] && break
	sleep 0.1
done

echo
echo "web console, $jobs jobs ($(sql -c "select string_agg(state || ' ' || n, ', ' order by n desc) from (select state, count(*) n from pgjob.all_jobs group by state) s")), loaded in ${load}s; $runs calls per page"
echo
echo "| page | p50 ms | p95 ms | max ms | bytes |"
echo "| --- | ---: | ---: | ---: | ---: |"
dead=$((jobs / 2 + 85))
"$build/pgjobd_bench_web" "$db" "$runs" \
	overview queues schedules tasks workflows workflow/500 \
	"job/$dead" jobs "jobs?state=dead" "jobs?state=dead&queue=email" \
	"jobs?state=available&queue=reports" "jobs?state=running" \
	"jobs?state=done" "jobs?state=cancelled" "jobs?kind=kind7" \
	"jobs?queue=media&kind=kind4" "jobs?q=user777777" \
	"jobs?before=$((jobs / 2))&limit=200" "jobs?workflow=500" \
	"jobs?state=scheduled" "jobs?state=retrying" "jobs?queue=media" \
	"jobs/count?state=dead" "jobs/count?kind=kind7&estimate=1" |
	awk -F'\t' '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}'

# The same pages through a real `pgjob web` (HTTP on loopback, one
# keep-alive connection as a browser holds, the open console's anonymous
# session): what a page's refresh waits for, server and HTTP included.
"$build/pgjob" -c "$dir/web.yaml" web --listen 127.0.0.1:0 2>"$dir/web.log" &
web=$!
port=
for _ in $(seq 1 100); do
	port=$(sed -n 's/.*console at http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$dir/web.log")
	[ -n "$port" ] && break
	sleep 0.1
done
echo
echo "over HTTP (pgjob web on 127.0.0.1:$port, $runs requests per page, one connection)"
echo
echo "| page | p50 ms | p95 ms | max ms | bytes |"
echo "| --- | ---: | ---: | ---: | ---: |"
python3 - "$port" "$runs" overview queues schedules tasks workflows \
	workflow/500 "job/$dead" jobs "jobs?state=dead" "jobs?kind=kind7" \
	"jobs?q=user777777" <<'PY'
import http.client, sys, time
port, runs, pages = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
c = http.client.HTTPConnection("127.0.0.1", port)
for page in pages:
    t = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        c.request("GET", "/api/" + page)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit(f"GET /api/{page}: {r.status} {body[:200]!r}")
        if i:  # the first one warms up
            t.append((time.perf_counter() - t0) * 1000)
    t.sort()
    p = lambda q: t[min(len(t) - 1, int(q * len(t)))]
    print(f"| {page} | {p(0.5):.1f} | {p(0.95):.1f} | {t[-1]:.1f} | {len(body)} |")
PY
kill -TERM "$web"
wait "$web" || true
