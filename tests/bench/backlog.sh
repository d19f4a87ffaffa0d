#!/usr/bin/env bash
# A huge backlog drained (docs/performance.md, "A huge backlog"):
#
#   tests/bench/backlog.sh [--jobs N] [--base N] [--workers W]
#                          [--concurrency C] [--every S]
#
# It starts its own PostgreSQL at default durability (scripts/testpg.sh, as
# the suite's) and runs the suite's retention-7d row config (the bench
# plugin's no-op jobs, W workers (2) of concurrency C (1000)).  First the
# reference: BASE jobs (200,000) queued, drained, timed by
# pgjobd_bench_tool's watch as the suite times its rows.  Then N jobs
# (10,000,000) queued in INSERT ... SELECTs of a million, VACUUM ANALYZE,
# a CHECKPOINT, a `pgjob web` started, and the same drain, while a sampler
# takes every S seconds (5): the jobs done and the queue figures' due jobs
# and age (pgjobd's /metrics), the RSS of
# every pgjobd process, the PSS of every PostgreSQL process (shared memory
# counted once among them, from /proc/PID/smaps_rollup), how long
# `pgjob status` takes, and how long the console's overview, queues, the
# first page of jobs and the estimated count take over HTTP.  It prints
# one line a sample, then a table: the drain's jobs/s against the
# reference's, the memory at the first sample, the last and the most, and
# p50, p95 and max of each answer's time, beside the console's target,
# 100 ms.
#
# Figures are printed, never asserted.  Ten million jobs take a few GB and
# minutes to queue; run it on a quiet machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
py=$(command -v /usr/bin/python3 || command -v python3)
# shellcheck source=scripts/testlib.sh
. "$root/scripts/testlib.sh"

n=10000000 base=200000 workers=2 conc=1000 every=5
usage="usage: backlog.sh [--jobs N] [--base N] [--workers W] [--concurrency C] [--every S]"
while [ $# -gt 0 ]; do
	case $1 in
	--jobs) n=$2; shift ;;
	--base) base=$2; shift ;;
	--workers) workers=$2; shift ;;
	--concurrency) conc=$2; shift ;;
	--every) every=$2; shift ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j2 --target pgjobd pgjob pgjobd_bench \
	pgjobd_bench_tool >/dev/null
dir="$build/bench-backlog"
PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
daemon= web= sampler=
cleanup() {
	for p in $sampler $web $daemon; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	# A drain runs in a command substitution, whose pgjobd the variable
	# above never sees: stopped by its config's path (interrupted runs).
	pkill -TERM -f -- "pgjobd -c $dir/pgjobd.yaml" 2>/dev/null || true
	bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null
}
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql "$db" -X -q -At -v ON_ERROR_STOP=1 "$@"; }
tool="$build/pgjobd_bench_tool"
"$build/pgjob" -d "$db" migrate >/dev/null

mport=$(free_port backlog)
cat >"$dir/pgjobd.yaml" <<EOF
database: { conninfo: "$db" }
workers: $workers
log: { level: warn }
retention: 7d
metrics: { listen: "127.0.0.1:$mport" }
queues: { default: { concurrency: $conc } }
handlers:
  noop: { type: plugin, library: "$build/pgjobd_bench.so", symbol: pgjobd_bench }
EOF
cat >"$dir/web.yaml" <<EOF
database: { conninfo: "$db" }
EOF

# count: queued in parts of a million, then analyzed and checkpointed, as
# the suite queues its rows.
enqueue() {
	local left=$1 part
	while [ "$left" -gt 0 ]; do
		part=$((left < 1000000 ? left : 1000000))
		sql -c "insert into pgjob.jobs (kind, payload) select 'noop', jsonb_build_object('id', i) from generate_series(1, $part) i"
		left=$((left - part))
	done
	sql -c "vacuum analyze pgjob.jobs" -c "checkpoint"
}

# One drain of what is queued: "jobs/s first_us end_us".
drain() { # jobs
	local out first end
	rm -f "$dir/ready"
	PGJOBD_BENCH_READY="$dir/ready" "$tool" wait "$db" 3600 >"$dir/wait.out" &
	local watch=$!
	until [ -e "$dir/ready" ] || ! kill -0 "$watch" 2>/dev/null; do sleep 0.01; done
	"$build/pgjobd" -c "$dir/pgjobd.yaml" 2>>"$dir/pgjobd.log" &
	daemon=$!
	wait "$watch"
	out=$(cat "$dir/wait.out")
	read -r first end _ <<<"$(sed 's/[a-z_]*=//g' <<<"$out")"
	kill -TERM "$daemon" 2>/dev/null || true
	wait "$daemon" 2>/dev/null || true
	daemon=
	awk -v n="$1" -v f="$first" -v e="$end" 'BEGIN {
		s = (e - f) / 1e6; if (s <= 0) s = 0.001
		printf "%.0f %s %s\n", n / s, f, e }'
}

echo "machine: $(nproc) cores; $(sql -c 'select version()' | cut -d, -f1); workers=$workers concurrency=$conc" >&2
enqueue "$base"
read -r base_rate _ <<<"$(drain "$base")"
echo "reference: $base jobs drained at $base_rate jobs/s" >&2

t0=$(date +%s.%N)
enqueue "$n"
echo "queued $n jobs in $(awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN {printf "%.0f", e - s}') s; table $(sql -c "select pg_size_pretty(pg_total_relation_size('pgjob.jobs'))")" >&2

"$build/pgjob" -c "$dir/web.yaml" web --listen 127.0.0.1:0 2>"$dir/web.log" &
web=$!
port=
for _ in $(seq 1 100); do
	port=$(sed -n 's/.*console at http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$dir/web.log")
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || { cat "$dir/web.log" >&2; exit 1; }

# The sampler: until it is stopped, a line every $every seconds.
"$py" - "$db" "$build/pgjob" "$port" "$mport" "$every" \
	"$(head -1 "$(cat "$dir/tmpdata" 2>/dev/null || echo "$dir/data")/postmaster.pid")" \
	>"$dir/samples" <<'PY' &
import http.client, json, os, re, subprocess, sys, time

db, pgjob, port, mport, every, pm = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                     int(sys.argv[4]), float(sys.argv[5]),
                                     int(sys.argv[6]))


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def field(pid, path, name):
    """A figure in kB from /proc/PID/PATH, 0 for a process gone."""
    try:
        with open(f"/proc/{pid}/{path}") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pgjobd_pids():
    out = subprocess.run(["pgrep", "-f", "pgjobd -c .*/bench-backlog/pgjobd.yaml"],
                         capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def scrape():
    """Jobs done, the default queue's due jobs and how old the queue
    figures are (s), from pgjobd's /metrics; Nones when it did not
    answer."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", mport, timeout=10)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
    except OSError:
        return None, None, None
    done = sum(float(m.group(1)) for m in re.finditer(
        r"^pgjobd_jobs_done_total(?:\{[^}]*\})? (\S+)$", text, re.M))
    due = re.search(r'^pgjobd_queue_due\{queue="default"\} (\S+)$', text, re.M)
    at = re.search(r"^pgjobd_queue_read_timestamp_seconds (\S+)$", text, re.M)
    return (done, float(due.group(1)) if due else -1,
            time.time() - float(at.group(1)) if at else -1)


def timed(fn):
    t = time.monotonic()
    ok = fn()
    return (time.monotonic() - t) * 1000 if ok else -1


def call(path, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status == 200


c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.request("GET", "/api/session")
r = c.getresponse()
cookie = r.getheader("Set-Cookie").split(";")[0]
r.read()
c.close()
h = {"Cookie": cookie}
calls = ["overview", "queues", "jobs", "jobs/count?estimate=1"]
last, lt = None, None
while True:
    t = time.time()  # the watch's clock (CLOCK_REALTIME)
    d, due, age = scrape()
    rate = (d - last) / (t - lt) if d is not None and last is not None else -1
    if d is not None:
        last, lt = d, t
    pids = pgjobd_pids()
    # The supervisor and its workers (forked: the same command line).
    rss = sum(field(p, "status", "VmRSS") for p in pids)
    pss = sum(field(p, "smaps_rollup", "Pss") for p in [pm] + children(pm))
    st = timed(lambda: subprocess.run([pgjob, "-d", db, "status"],
                                      capture_output=True).returncode == 0)
    web = [timed(lambda p=p: call("/api/" + p, h)) for p in calls]
    print(f"t={t:.1f} done={d if d is not None else -1:.0f} rate={rate:.0f} "
          f"pgjobd_rss_kb={rss} pg_pss_kb={pss} metrics_due={due or -1:.0f} "
          f"metrics_age_s={age or -1:.1f} status_ms={st:.1f} "
          + " ".join(f"{p.split('?')[0].replace('/', '_')}_ms={w:.1f}"
                     for p, w in zip(calls, web)), flush=True)
    time.sleep(max(0.0, every - (time.time() - t)))
PY
sampler=$!
sleep "$every"
read -r big_rate first end <<<"$(drain "$n")"
kill -TERM "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=

# The samples taken while the drain ran (by the watch's clock, µs).
"$py" - "$dir/samples" "$first" "$end" "$n" "$base" "$base_rate" "$big_rate" <<'PY'
import re, sys
from statistics import median

path, first, end = sys.argv[1], int(sys.argv[2]) / 1e6, int(sys.argv[3]) / 1e6
n, base, base_rate, big_rate = (int(sys.argv[4]), int(sys.argv[5]),
                                float(sys.argv[6]), float(sys.argv[7]))
rows = []
for line in open(path):
    kv = dict(x.split("=", 1) for x in line.split())
    rows.append({k: float(v) for k, v in kv.items()})
# The samples taken while the drain ran (t and the watch's first and end
# are both CLOCK_REALTIME).
run = [r for r in rows if first <= r["t"] <= end]
for r in rows:
    print(" ".join(f"{k}={v:g}" for k, v in r.items()), file=sys.stderr)
print()
print(f"a backlog of {n:,} jobs: {big_rate:,.0f} jobs/s, "
      f"{big_rate / base_rate:.2f} x the {base:,}-job rate "
      f"({base_rate:,.0f} jobs/s); {len(run)} samples during the drain")
print()
print("| figure | first | last | most |")
print("| --- | ---: | ---: | ---: |")
for k in ("pgjobd_rss_kb", "pg_pss_kb"):
    v = [r[k] for r in run] or [0]
    print(f"| {k} | {v[0]:,.0f} | {v[-1]:,.0f} | {max(v):,.0f} |")
# The workers' queue figures (/metrics): how old they were at each
# sample (read every 5 s; a read stopped at 5 s leaves them as they were),
# and the due jobs they said at the first and last samples.
age = [r["metrics_age_s"] for r in run if r.get("metrics_age_s", -1) >= 0]
due = [r["metrics_due"] for r in run if r.get("metrics_due", -1) >= 0]
if age and due:
    print(f"/metrics queue figures: age p50 {median(age):.1f} s, max "
          f"{max(age):.1f} s; due {due[0]:,.0f} at the first sample, "
          f"{due[-1]:,.0f} at the last")
print()
print("| answer | p50 ms | p95 ms | max ms | p95 ≤ 100 ms |")
print("| --- | ---: | ---: | ---: | --- |")


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


for k in [k for k in (run[0] if run else {}) if k.endswith("_ms")]:
    v = [r[k] for r in run]
    if any(x < 0 for x in v):
        print(f"| {k[:-3]} | failed | | | **no** |")
        continue
    p95 = pct(v, 0.95)
    print(f"| {k[:-3]} | {median(v):.1f} | {p95:.1f} | {max(v):.1f} | "
          f"{'yes' if p95 <= 100 else '**no**'} |")
PY
