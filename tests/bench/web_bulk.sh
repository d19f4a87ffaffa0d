#!/usr/bin/env bash
# A bulk action of the web console beside working workers
# (docs/performance.md, "The web console"):
#
#   tests/bench/web_bulk.sh [--jobs N] [--actions "retry cancel delete"]
#                           [--step N] [--workers W] [--concurrency C]
#                           [--wait S] [--from STATE]
#
# It starts its own PostgreSQL (scripts/testpg.sh, default durability, as
# the suite's), inserts N jobs (1,000,000) dead in the queue "bulk", and
# starts a pgjobd of W workers (2) that serve only the queue "feed" with
# the bench plugin's no-op handler, concurrency C (200) each, while a
# feeder keeps that queue's backlog between 50,000 and 100,000 jobs (one
# INSERT ... SELECT of 20,000 when it falls below), so the workers never
# wait for work.  Then, for each action in turn (retry: dead to available;
# cancel: available to cancelled; delete: cancelled to gone, so each takes
# the million the one before left), as the console's page does it through
# a real `pgjob web` over HTTP: the exact count of the filter
# {"queue": "bulk"} (in parts, from "next"), then POST /api/jobs/ACTION
# with {"filter", "expect", "limit": STEP (5000), "before"} request after
# request until "next" is null.  It prints the progress every tenth of the way, then one line per
# action: how long it took, the jobs it changed, and the workers' jobs/s
# (pgjobd_jobs_done_total from pgjobd's /metrics) over the 20 s before it,
# during it, and their ratio, which should be 0.9 or more; "requests (paused)"
# counts the requests in which the server paused for the busy workers
# (src/web/bulk_yield.c).
#
# --from available or cancelled inserts the N jobs in that state instead
# of dead (available ones stay: no worker serves the queue "bulk"), so
# that cancel (from available) and delete (from cancelled) are measured
# from a fresh start as retry is, each beside its own control.
#
# The action "wait" is the control: no request, S seconds (--wait, 300)
# measured the same way.  The workers' rate drifts by itself as their done
# jobs pile up (retention 7d: about 30,000 rows a second into
# pgjob.jobs_done) and checkpoints come round, so a ratio means the
# action's cost only beside a wait as long as the action, from a fresh
# start: `--actions retry` and then `--actions wait --wait SECONDS`, in
# turn.
#
# Figures are printed, never asserted.  On a machine shared with other
# work, a tenth moves with anything else that runs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
# shellcheck source=scripts/testlib.sh
. "$root/scripts/testlib.sh"

jobs=1000000 actions="retry cancel delete" step=5000 workers=2 conc=200 wait=300
from=dead
usage="usage: web_bulk.sh [--jobs N] [--from dead|available|cancelled] [--actions \"retry cancel delete wait\"] [--step N] [--workers W] [--concurrency C] [--wait S]"
while [ $# -gt 0 ]; do
	case $1 in
	--jobs) jobs=$2; shift ;;
	--actions) actions=$2; shift ;;
	--step) step=$2; shift ;;
	--workers) workers=$2; shift ;;
	--concurrency) conc=$2; shift ;;
	--wait) wait=$2; shift ;;
	--from)
		case $2 in dead | available | cancelled) from=$2 ;;
		*) echo "$usage" >&2; exit 2 ;; esac
		shift ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j2 --target pgjobd pgjob pgjobd_bench >/dev/null
dir="$build/bench-web-bulk"
PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
daemon= web= feeder=
cleanup() {
	for p in $feeder $web $daemon; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
}
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql "$db" -X -q -At -v ON_ERROR_STOP=1 "$@"; }

"$build/pgjob" -d "$db" migrate >/dev/null
start=$(date +%s.%N)
sql -v n="$jobs" -v st="$from" <<'SQL'
-- Dead after three attempts, cancelled after one, or available, never run.
insert into pgjob.jobs (queue, kind, payload, state, attempts, max_attempts,
	last_error, created_at, finished_at, attempted_at, locked_by,
	lease_token, run_at)
select 'bulk', 'kind' || (i % 20), jsonb_build_object('user', i),
	:'st', r.tries, 3,
	case when :'st' = 'dead' then 'exit status 1: upstream said no' end, c,
	case when r.tries > 0 then c + interval '1 second' end,
	case when r.tries > 0 then c + interval '10 ms' end,
	case when r.tries > 0 then 'bench-1:1' end, r.tries, c
  from generate_series(1, :n) i,
	lateral (select now() - (:n - i) * interval '3 ms' as c) x,
	lateral (select case :'st' when 'dead' then 3 when 'cancelled' then 1
		else 0 end as tries) r;
vacuum analyze;
checkpoint;
SQL
load=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.0f", e - s}')

mport=$(free_port web_bulk)
cat >"$dir/pgjobd.yaml" <<EOF
database: { conninfo: "$db" }
workers: $workers
log: { level: warn }
retention: 7d
metrics: { listen: "127.0.0.1:$mport" }
queues: { feed: { concurrency: $conc } }
handlers:
  noop: { type: plugin, queue: feed, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench }
EOF
cat >"$dir/web.yaml" <<EOF
database: { conninfo: "$db" }
EOF

# The feeder: the queue "feed" never runs dry.
(
	while :; do
		sql -c "insert into pgjob.jobs (queue, kind)
			select 'feed', 'noop' from generate_series(1, 20000)
			 where (select count(*) from (select 1 from pgjob.jobs
				where queue = 'feed' and finished_at is null
				limit 50000) x) < 50000" 2>/dev/null || true
		sleep 0.2
	done
) &
feeder=$!
"$build/pgjobd" -c "$dir/pgjobd.yaml" >"$dir/pgjobd.log" 2>&1 &
daemon=$!
"$build/pgjob" -c "$dir/web.yaml" web --listen 127.0.0.1:0 2>"$dir/web.log" &
web=$!
port=
for _ in $(seq 1 100); do
	port=$(sed -n 's/.*console at http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$dir/web.log")
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || { cat "$dir/web.log" >&2; exit 1; }

echo
echo "a bulk action on $jobs jobs (loaded in ${load}s) beside $workers workers × $conc of no-op jobs; steps of $step"
echo
python3 - "$db" "$port" "$mport" "$step" "$wait" $actions <<'PY'
import http.client, json, re, subprocess, sys, time

db = sys.argv[1]
port, mport, step, wait, actions = (int(sys.argv[2]), int(sys.argv[3]),
                                    int(sys.argv[4]), float(sys.argv[5]),
                                    sys.argv[6:])


def server():
    """The WAL written so far (bytes), autovacuum's runs on pgjob.jobs and
    the checkpoints so far: what an action leaves for later is paid there."""
    out = subprocess.run(
        ["psql", db, "-X", "-At", "-F", " ", "-c",
         "select pg_current_wal_lsn() - '0/0', "
         "(select autovacuum_count from pg_stat_user_tables "
         "where relid = 'pgjob.jobs'::regclass), "
         "(select checkpoints_timed + checkpoints_req "
         "from pg_stat_bgwriter)"],
        check=True, capture_output=True, text=True).stdout.split()
    return [float(x) for x in out]


def done_total():
    """pgjobd's jobs done so far, from its /metrics."""
    c = http.client.HTTPConnection("127.0.0.1", mport, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    return sum(float(m.group(1)) for m in re.finditer(
        r"^pgjobd_jobs_done_total(?:\{[^}]*\})? (\S+)$", text, re.M))


def rate(seconds):
    """The workers' jobs/s over the next seconds."""
    d0, t0 = done_total(), time.monotonic()
    time.sleep(seconds)
    return (done_total() - d0) / (time.monotonic() - t0)


def call(method, path, body=None, headers=None):
    # A connection a request, as the console's idle ones close after 30 s.
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.getheader("Set-Cookie"), json.loads(data)


st, cookie, s = call("GET", "/api/session")
h = {"Cookie": cookie.split(";")[0], "X-CSRF-Token": s["csrf"],
     "Content-Type": "application/json"}
# The workers warm up: their first seconds are not the steady state.
time.sleep(10)
print("| action | jobs | s | requests (paused) | slowest request ms "
      "| workers jobs/s before | during | during / before "
      "| WAL MB/s before | during | autovacuums of jobs | checkpoints |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
      "| ---: | ---: | ---: | ---: |")


def row(a, done, secs, requests, paused, slowest, before, d0, s0, s1):
    """One action's line: s0 is server() at the start of the 20 s before
    it, s1 at its start."""
    during = (done_total() - d0) / secs
    s2 = server()
    print(f"| {a} | {done:,} | {secs:.1f} | {requests} ({paused}) | "
          f"{slowest * 1000:.0f} | {before:,.0f} | {during:,.0f} | "
          f"{during / before:.2f} | {(s1[0] - s0[0]) / 20 / 1e6:.1f} | "
          f"{(s2[0] - s1[0]) / secs / 1e6:.1f} | {s2[1] - s1[1]:.0f} | "
          f"{s2[2] - s1[2]:.0f} |", flush=True)


for a in actions:
    s0 = server()
    before = rate(20)
    s1 = server()
    if a == "wait":
        # The control: the same figures over the same kind of stretch,
        # with no action.
        d0, t0 = done_total(), time.monotonic()
        time.sleep(wait)
        row(a, 0, time.monotonic() - t0, 0, 0, 0.0, before, d0, s0, s1)
        continue
    f = {"queue": "bulk"}
    # The count in parts where the server says where to go on (next);
    # the action then starts where it did (below), as the page does.
    n, start, more = 0, None, ""
    while True:
        st, _, d = call("GET", "/api/jobs/count?queue=bulk" + more,
                        headers=h)
        if st != 200:
            sys.exit(f"GET /api/jobs/count: {st} {d}")
        n += d["count"]
        if d.get("next") is None:
            break
        start = start or str(d["below"])
        more = f"&before={d['next']}"
    d0, t0 = done_total(), time.monotonic()
    done, cursor, requests, slowest, shown = 0, start, 0, 0.0, 0
    paused = 0
    while True:
        body = {"filter": f, "expect": n - done, "limit": step}
        if cursor:
            body["before"] = cursor
        r0 = time.monotonic()
        st, _, r = call("POST", "/api/jobs/" + a, json.dumps(body), h)
        slowest = max(slowest, time.monotonic() - r0)
        requests += 1
        if st != 200:
            sys.exit(f"POST /api/jobs/{a}: {st} {r}")
        done += r["affected"]
        paused += r.get("yielded") is True
        if done * 10 // max(n, 1) > shown:
            shown = done * 10 // max(n, 1)
            print(f"  {a}: {done:,} of {n:,} after "
                  f"{time.monotonic() - t0:.1f} s", file=sys.stderr,
                  flush=True)
        if r["next"] is None:
            break
        cursor = str(r["next"])
    row(a, done, time.monotonic() - t0, requests, paused, slowest, before,
        d0, s0, s1)
PY
