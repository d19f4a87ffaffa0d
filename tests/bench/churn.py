#!/usr/bin/env python3
"""The feeder and the sampler of tests/bench/churn.sh (read it first).

    churn.py CONNINFO METRICS_PORT RATE SECONDS INTERVAL TICK_MS OUT_TSV

Feeds RATE jobs/s into pgjob.jobs for SECONDS, one INSERT ... SELECT
generate_series every TICK_MS (absolute deadlines on the monotonic clock, so
a slow tick is not carried into the next ones), through one psql process of
its own: a server that falls behind makes the pipe fill, never the feed
slow down unseen (the rows fed are counted when psql reports them done).
Every INTERVAL seconds it samples, and writes one line to OUT_TSV:

    t  fed/s  done/s  claim_p50_ms  claim_p99_ms  claim_mean_ms  backlog
    dead_tuples  table_MB  index_MB

done/s and the claim figures come from pgjobd's own /metrics (the
pgjobd_jobs_done_total counters and the pgjobd_claim_seconds histogram,
whose buckets give the quantiles by linear interpolation, as Prometheus'
histogram_quantile does); claim_mean_ms is the server's side, from
pg_stat_statements (the claim statement's mean execution time over the
interval).  backlog is the jobs fed and not yet done: fed minus done,
no count(*) over a table that holds millions of rows.
"""
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

conninfo, port, rate, seconds, interval, tick_ms, out = sys.argv[1:]
rate, seconds, interval, tick_ms = (float(rate), float(seconds),
                                    float(interval), float(tick_ms))

def psql(sql):
    return subprocess.run(
        ["psql", "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1",
         conninfo, "-c", sql],
        check=True, capture_output=True, text=True).stdout.strip()

# The feed: psql echoes "INSERT 0 n" for each statement it ran, read on a
# thread of its own; fed[0] is what the server has committed.
fed = [0]
feeder = subprocess.Popen(
    ["psql", "-X", "-v", "ON_ERROR_STOP=1", conninfo],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

def count_fed():
    for line in feeder.stdout:
        m = re.match(r"INSERT 0 (\d+)", line)
        if m:
            fed[0] += int(m.group(1))

threading.Thread(target=count_fed, daemon=True).start()

def metrics():
    """(done total, claim buckets [(le, count)], claim count)."""
    text = urllib.request.urlopen(
        f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    done = sum(float(v) for v in re.findall(
        r"^pgjobd_jobs_done_total\{[^}]*\} (\S+)$", text, re.M))
    buckets = [(float(le), float(v)) for le, v in re.findall(
        r'^pgjobd_claim_seconds_bucket\{le="([^"+]+)"\} (\S+)$', text, re.M)]
    count = float(re.search(r"^pgjobd_claim_seconds_count (\S+)$", text,
                            re.M).group(1))
    return done, buckets, count

def quantile(q, b0, b1, c0, c1):
    """histogram_quantile over the difference of two scrapes, in ms."""
    total = c1 - c0
    if total <= 0:
        return float("nan")
    want, prev_le, prev_n = q * total, 0.0, 0.0
    for (le, n1), (_, n0) in zip(b1, b0):
        n = n1 - n0
        if n >= want:
            if n == prev_n:
                return le * 1000
            return (prev_le + (le - prev_le) * (want - prev_n)
                    / (n - prev_n)) * 1000
        prev_le, prev_n = le, n
    return prev_le * 1000  # in +Inf: the highest finite bound

# The jobs table's figures, summed over its partitions if it has any (a
# trial of another storage, CHURN_SETUP_SQL in churn.sh).
STATS_SQL = """
with t as (select relid from pg_partition_tree('pgjob.jobs') where isleaf
           union all  -- (a table that is not partitioned has no tree)
           select 'pgjob.jobs'::regclass from pg_class
            where oid = 'pgjob.jobs'::regclass and relkind = 'r')
select coalesce((select sum(n_dead_tup) from pg_stat_user_tables
                  where relid in (select relid from t)), 0),
       (select sum(pg_table_size(relid)) from t) / 1048576.0,
       (select sum(pg_indexes_size(relid)) from t) / 1048576.0,
       coalesce((select sum(total_exec_time) from pg_stat_statements
                  where query like 'with qa(name%'), 0),
       coalesce((select sum(calls) from pg_stat_statements
                  where query like 'with qa(name%'), 0)
"""

def sample():
    d, b, c = metrics()
    dead, tmb, imb, ms, calls = psql(STATS_SQL).split("\t")
    return (time.monotonic(), fed[0], d, b, c, int(dead), float(tmb),
            float(imb), float(ms), float(calls))

per_tick = rate * tick_ms / 1000.0
stmt = ("insert into pgjob.jobs (kind, payload) select 'noop', "
        "jsonb_build_object('id', i) from generate_series(1, {}) i;\n")
start = time.monotonic()
last = sample()
next_sample = start + interval
owed = 0.0
tick = 0
with open(out, "w") as f:
    while True:
        now = time.monotonic()
        if now - start >= seconds and now < next_sample:
            break
        owed += per_tick
        n = int(owed)
        owed -= n
        if n:
            feeder.stdin.write(stmt.format(n))
            feeder.stdin.flush()
        tick += 1
        if time.monotonic() >= next_sample:
            s = sample()
            dt = s[0] - last[0]
            calls = s[9] - last[9]
            f.write("\t".join(str(x) for x in (
                round(s[0] - start), round((s[1] - last[1]) / dt),
                round((s[2] - last[2]) / dt),
                round(quantile(0.5, last[3], s[3], last[4], s[4]), 2),
                round(quantile(0.99, last[3], s[3], last[4], s[4]), 2),
                round((s[8] - last[8]) / calls, 2) if calls else "nan",
                round(s[1] - s[2]), s[5], round(s[6]), round(s[7]))) + "\n")
            f.flush()
            last = s
            next_sample += interval
            if s[0] - start >= seconds:
                break
        time.sleep(max(0.0, start + tick * tick_ms / 1000.0 - time.monotonic()))
feeder.stdin.close()
# Statements the feeder has not run by now are not part of the run: a feed
# above what the server can insert queues them in psql's input, and a
# wait for them all once took minutes (bench.short's fresh database, fed
# from a rate that was itself a mismeasure).
try:
    feeder.wait(timeout=5)
except subprocess.TimeoutExpired:
    feeder.kill()
    feeder.wait()
