#!/usr/bin/env bash
# The web console's pages with a million jobs, or ten (docs/performance.md,
# "The web console"):
#
#   tests/bench/web.sh [--jobs N] [--runs N] [--keep] [--reuse] [--direct]
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
# move.  --keep leaves that PostgreSQL running, and a later --reuse with
# the same --jobs starts from it (10,000,000 jobs take minutes to load and
# about 10 GB; a run without --keep removes them).
#
# Every call a page makes (the list is below) is timed RUNS times (50)
# after one warm-up through a real `pgjob web` over HTTP, gzip taken as a
# browser takes it: p50, p95 and max in ms, the answer's size as sent, and
# whether its p95 is within the console's target, 100 ms; then how many
# are, and which are not.  --direct times the same calls first without
# HTTP, by pgjobd_bench_web (tests/bench/web_bench.c) on one connection set
# up as pgjob web's: what the database and the API's code take alone.
# jobs/count is asked exact by a bulk action's confirmation (where no
# index serves the filter, in parts: each call is the first; then one
# such count whole, request after request), and with
# estimate=1 by a filtered jobs page at each refresh (past 300,000 rows,
# the planner's estimate).  A filtered page that is not full asks /api/jobs
# again from searched_to: each call here is one of those.  Figures are
# printed, never asserted.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}

jobs=1000000 runs=50 keep=0 reuse=0 direct=0
usage="usage: web.sh [--jobs N] [--runs N] [--keep] [--reuse] [--direct]"
while [ $# -gt 0 ]; do
	case $1 in
	--jobs) jobs=$2; shift ;;
	--runs) runs=$2; shift ;;
	--keep) keep=1 ;;
	--reuse) reuse=1 ;;
	--direct) direct=1 ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j2 --target pgjobd pgjob pgjobd_bench_web >/dev/null
dir="$build/bench-web"
# --keep leaves the PostgreSQL and its jobs (loading 10,000,000 takes
# minutes) for a next run with --reuse, which skips the load when the
# kept one holds as many jobs; a run without --keep stops it.
loaded=0
if [ "$reuse" = 1 ] && [ -f "$dir/conninfo" ] &&
	[ "$(psql "$(cat "$dir/conninfo")" -X -At -c 'select max(id) from pgjob.jobs' 2>/dev/null)" = "$jobs" ]; then
	loaded=1
else
	bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
fi
daemon= web=
cleanup() {
	for p in $web $daemon; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ "$keep" = 1 ] || bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
}
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql "$db" -X -q -At -v ON_ERROR_STOP=1 "$@"; }

"$build/pgjob" -d "$db" migrate >/dev/null
start=$(date +%s.%N)
[ "$loaded" = 1 ] || sql -v n="$jobs" <<'SQL'
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
load="loaded in $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.0f", e - s}')s"
[ "$loaded" = 0 ] || load="kept from an earlier run (--reuse)"

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

# Every page and every filter the console asks for: the pages, each
# state's list (scheduled and retrying included), a queue, a kind, both,
# a text search (one that matches and one that matches nothing: a call of
# each is one step of a search that the page goes on from searched_to),
# deep pages (before= half-way down and a tenth of the way up), a
# workflow's jobs, and the counts, exact (a bulk action's confirmation)
# and estimated (a filtered page's total at each refresh).
half=$((jobs / 2)) tenth=$((jobs / 10))
dead=$((half + 85))
calls=(overview queues schedules tasks workflows workflow/500 "job/$dead"
	history "history?range=30d"
	jobs "jobs?state=available" "jobs?state=running" "jobs?state=waiting"
	"jobs?state=done" "jobs?state=dead" "jobs?state=cancelled"
	"jobs?state=scheduled" "jobs?state=retrying"
	"jobs?queue=media" "jobs?kind=kind7" "jobs?queue=media&kind=kind4"
	"jobs?state=dead&queue=email" "jobs?state=available&queue=reports"
	"jobs?state=done&kind=kind5"
	"jobs?q=user777777" "jobs?q=no-such-text" "jobs?queue=media&q=user777"
	"jobs?before=$half&limit=200" "jobs?queue=media&before=$tenth"
	"jobs?kind=kind7&before=$tenth" "jobs?state=dead&before=$tenth"
	"jobs?state=done&queue=email&before=$tenth" "jobs?workflow=500"
	"jobs/count?estimate=1" "jobs/count?queue=media&estimate=1"
	"jobs/count?kind=kind7&estimate=1" "jobs/count?state=dead&estimate=1"
	"jobs/count?state=scheduled&estimate=1"
	"jobs/count?state=retrying&estimate=1"
	"jobs/count?q=user777777&estimate=1"
	"jobs/count?state=dead" "jobs/count?state=retrying"
	"jobs/count?state=scheduled" "jobs/count?queue=media&kind=kind4"
	"jobs/count?kind=kind7" "jobs/count?queue=media")

# One line per call: p50, p95 and max in ms, the bytes of the answer, and
# whether its p95 is within the console's target, 100 ms.
verdict() {
	awk -F'\t' '{bad = $3 == "-" || $3 + 0 > 100; n++
		if (bad) {nb++; over = over (nb > 1 ? ", " : "") $1}
		printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5,
			bad ? "**no**" : "yes"; fflush()}
		END {printf "\n%d of %d calls within 100 ms at p95%s\n", n - nb, n,
			nb ? "; over: " over : ""}'
}

echo
echo "web console, $jobs jobs ($(sql -c "select string_agg(state || ' ' || n, ', ' order by n desc) from (select state, count(*) n from pgjob.all_jobs group by state) s")), $load; $runs calls each"

if [ "$direct" = 1 ]; then
	echo
	echo "the API without HTTP (web_api_get() on one connection set up as pgjob web's)"
	echo
	echo "| call | p50 ms | p95 ms | max ms | bytes | p95 ≤ 100 ms |"
	echo "| --- | ---: | ---: | ---: | ---: | --- |"
	# A call that fails has its line: the others are still timed.
	{ "$build/pgjobd_bench_web" "$db" "$runs" "${calls[@]}" || true; } | verdict
fi

# Through a real `pgjob web` (HTTP on loopback, one keep-alive connection
# as a browser holds, the open console's anonymous session, gzip taken as
# a browser takes it): what a page's refresh waits for, server and HTTP
# included.
"$build/pgjob" -c "$dir/web.yaml" web --listen 127.0.0.1:0 2>"$dir/web.log" &
web=$!
port=
for _ in $(seq 1 100); do
	port=$(sed -n 's/.*console at http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$dir/web.log")
	[ -n "$port" ] && break
	sleep 0.1
done
echo
echo "over HTTP (pgjob web on 127.0.0.1:$port, $runs requests per call after one, one connection; bytes as sent, gzip'd past 1 KiB)"
echo
echo "| call | p50 ms | p95 ms | max ms | bytes | p95 ≤ 100 ms |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
python3 - "$port" "$runs" "${calls[@]}" <<'PY' | verdict
import gzip, http.client, json, sys, time
port, runs, pages = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
c = http.client.HTTPConnection("127.0.0.1", port)
for page in pages:
    t = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        c.request("GET", "/api/" + page, headers={"Accept-Encoding": "gzip"})
        r = c.getresponse()
        body = r.read()
        size = len(body)
        if r.getheader("Content-Encoding") == "gzip":
            body = gzip.decompress(body)  # as the browser does, timed
        if r.status != 200:
            break
        if i:  # the first one warms up
            t.append((time.perf_counter() - t0) * 1000)
    if r.status != 200:
        # A call that fails (a count past the 5 s statement timeout):
        # said in the table, and the others still timed.
        err = json.loads(body).get("error", "")[:60] if body else ""
        print(f"{page} (answered {r.status}: {err})\t-\t-\t-\t-", flush=True)
        continue
    t.sort()
    p = lambda q: t[min(len(t) - 1, -(-int(q * 100) * len(t) // 100) - 1)]
    print(f"{page}\t{p(0.5):.1f}\t{p(0.95):.1f}\t{t[-1]:.1f}\t{size}",
          flush=True)
PY
# A bulk action's confirmation counts a filter that no index serves in
# parts (docs/console.md): each call above is its first request; here the
# whole count of one, request after request from next, as the page asks.
python3 - "$port" "jobs/count?kind=kind7" <<'PY'
import gzip, http.client, json, sys, time
port, page = int(sys.argv[1]), sys.argv[2]
c = http.client.HTTPConnection("127.0.0.1", port)
n, parts, slowest, before = 0, 0, 0.0, None
t0 = time.perf_counter()
while True:
    t1 = time.perf_counter()
    c.request("GET", "/api/" + page + (f"&before={before}" if before else ""),
              headers={"Accept-Encoding": "gzip"})
    r = c.getresponse()
    body = r.read()
    if r.getheader("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    slowest = max(slowest, (time.perf_counter() - t1) * 1000)
    if r.status != 200:
        print(f"\n{page} whole: answered {r.status} after {parts} requests")
        break
    d = json.loads(body)
    n += d["count"]
    parts += 1
    if d.get("next") is None:
        print(f"\n{page} whole, as a bulk confirmation counts it: {n} jobs"
              f" in {parts} requests, {time.perf_counter() - t0:.1f} s,"
              f" the slowest {slowest:.0f} ms")
        break
    before = d["next"]
PY
kill -TERM "$web"
wait "$web" || true
