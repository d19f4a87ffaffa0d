#!/usr/bin/env python3
"""The checker of the chaos runs on the features (docs/faults.md#chaos-on-the-features).

After the run, it reads the database (jobs, attempts, edges, batches, the
sql handlers' ledger tables) and the run's own files (the exec ledger, the
instances' logs, the events the run made with the database's times, the
samples taken during the run), checks every invariant, prints one figures
line and exits 1 when one is broken, as Jepsen's queue checkers read a
history after the fact:

- no job lost: every id the run was told was committed is there, and every
  job ended done (a cancel-policy child of a dead parent: cancelled);
- sql jobs exactly once: one ledger row per sql job, under its final token;
- exec jobs at least once: a ledger line under the final token, no token
  twice or above the final one; earlier completed runs (duplicates) only
  from runs that lost their lease (the fault suite's rule);
- workflows: each child started after all its parents ended, ran once (its
  ledger row), and as its on_parent_failure says when a parent died;
- batches: exactly one callback each, its counts the batch's;
- concurrency: sampled (running under a lease that holds) and from the
  runs' intervals (handlers' ledger and attempts' times) never above the
  queue's global_concurrency, but for a worker stopped past its lease;
- rate: the starts (every attempt's, by the bucket's own clock) of any
  stretch d cost at most burst + rate x d;
- fairness: while a key has jobs waiting, another key gets at most its
  weight of starts per start of it, give or take two turns and the starts
  of lost runs (a key gets at least one start per turn), and in the chaos
  run (not the soak) the weight-3 key heavy got 3 starts per start of light,
  give or take one, while both had jobs waiting (heavy_per_light);
- pause: no job of the paused queue started between the pause's commit
  and the resume;
- schedules: one job per tick, one per run request, none for a tick while
  the schedule was disabled;
- fencing: no running job's lease token and no lease's token went back
  between samples.
"""
import argparse
import calendar
import collections
import csv
import datetime
import io
import json
import os
import re
import subprocess
import sys

fails = []


def fail(msg):
    if len(fails) < 60:
        print(f"CHAOS INVARIANT: {msg}", file=sys.stderr)
    fails.append(msg)


def rows(ci, sql):
    """The rows of sql as lists of strings (None for null), by psql --csv."""
    for _ in range(3):
        r = subprocess.run(["psql", "-X", "-q", "--csv", "-v", "ON_ERROR_STOP=1",
                            "-P", "null=\\N", ci, "-c", sql],
                           capture_output=True, text=True)
        if r.returncode == 0:
            break
    if r.returncode != 0:
        fail(f"query failed: {r.stderr.strip()}: {sql[:120]}")
        return []
    out = list(csv.reader(io.StringIO(r.stdout)))[1:]
    return [[None if v == "\\N" else v for v in row] for row in out]


def us(col):
    """A timestamptz column as integer microseconds since the epoch."""
    return f"(extract(epoch from {col}) * 1000000)::bigint"


def iso_us(s):
    d = datetime.datetime.strptime(s.rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f")
    return calendar.timegm(d.timetuple()) * 1000000 + d.microsecond


def num(v):
    return None if v is None else int(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--conninfo", required=True)
    ap.add_argument("--instances", type=int, required=True)
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--wall-ms", type=int, default=0)
    ap.add_argument("--figures", default="")
    ap.add_argument("--scenario", default="chaos")
    # The soak: finished jobs are pruned as it runs; a job no longer in
    # the tables is checked in the ledgers alone.
    ap.add_argument("--soak", action="store_true")
    a = ap.parse_args()
    ci, d = a.conninfo, a.dir

    # ---- the run's own files -------------------------------------------
    ev = collections.defaultdict(list)
    with open(os.path.join(d, "events")) as f:
        for line in f:
            p = line.split()
            if p:
                ev[p[0]].append(p[1:])
    faulted = {int(p[0]) for p in ev["faulted"]}
    stop_windows = []  # (slot, pid, from_us, to_us)
    for s in ev["stopped"]:
        cont = [c for c in ev["continued"] if c[0] == s[0]]
        t0 = iso_us(s[1])
        t1 = min((iso_us(c[1]) for c in cont if iso_us(c[1]) >= t0), default=None)
        stop_windows.append((s[0], int(s[2]), t0, t1))
    committed = set()
    workflows_made = 0
    with open(os.path.join(d, "enqueued")) as f:
        for line in f:
            p = line.strip().split("|")
            if len(p) == 2 and p[0] == "J":
                committed.add(int(p[1]))
            elif len(p) == 2 and p[0] == "W":
                workflows_made += 1

    # Worker pids and lease losses from the instances' logs.
    worker_pids, lost_marks = set(), set()
    lease_lost_lines = 0
    marks = ("lease lost", "the lease was lost", "giving up writing its end",
             "lease not renewed by its deadline")
    for i in range(a.instances):
        path = os.path.join(d, f"i{i}.log")
        if not os.path.exists(path):
            continue
        with open(path, errors="replace") as f:
            for line in f:
                m = re.search(r" pid=(\d+)", line)
                pid = int(m.group(1)) if m else 0
                if pid and " proc=worker " in line:
                    worker_pids.add(pid)
                if "lease lost" in line:
                    lease_lost_lines += 1
                if pid and "jobs unwritten; their leases expire" in line:
                    faulted.add(pid)
                j = re.search(r" job=(\d+)", line)
                if j and any(k in line for k in marks):
                    lost_marks.add((pid, int(j.group(1))))

    # ---- the database ---------------------------------------------------
    jobs = {}
    for r in rows(ci, f"""select id, queue, kind, state, attempts, lease_token,
            {us('attempted_at')}, {us('finished_at')}, {us('created_at')},
            workflow_id, step, on_parent_failure, batch_id, limit_key, cost,
            locked_by, payload::text, unique_key
          from pgjob.all_jobs"""):
        jobs[int(r[0])] = dict(
            id=int(r[0]), queue=r[1], kind=r[2], state=r[3], attempts=int(r[4]),
            token=int(r[5]), attempted=num(r[6]), finished=num(r[7]),
            created=num(r[8]), wf=num(r[9]), step=r[10],
            # null: the default, cancel (docs/workflows.md)
            opf=r[11] or "cancel",
            batch=num(r[12]), key=r[13], cost=int(r[14]), worker=r[15],
            payload=r[16], unique_key=r[17])
    for j in jobs.values():
        j["payload"] = json.loads(j["payload"])
    attempts = collections.defaultdict(list)
    for r in rows(ci, f"""select job_id, attempt, token, {us('started_at')},
            {us('finished_at')}, worker, outcome from pgjob.attempts"""):
        attempts[int(r[0])].append(dict(attempt=int(r[1]), token=int(r[2]),
                                        start=num(r[3]), end=num(r[4]),
                                        worker=r[5], outcome=r[6]))
    ledger_sql = collections.defaultdict(list)
    # (job, token) -> when the sql handler's row was written: a moment of
    # the run, after its claim committed.
    sql_at = {}
    for r in rows(ci, f"select job_id, token, {us('at')} from ledger_sql"):
        ledger_sql[int(r[0])].append(int(r[1]))
        sql_at[(int(r[0]), int(r[1]))] = int(r[2])
    deps = [(int(r[0]), int(r[1]), r[2]) for r in
            rows(ci, "select parent, child, resolved from pgjob.job_deps")]
    batches = rows(ci, f"""select id, sealed, total, done, dead, cancelled,
            callback_job, {us('finished_at')} from pgjob.batches""")
    batch_members = collections.defaultdict(list)
    for r in rows(ci, "select batch_id, job_id from batch_members"):
        batch_members[int(r[0])].append(int(r[1]))
    ledger_batch = collections.defaultdict(list)
    for r in rows(ci, "select batch_id, job_id, token, counts::text from ledger_batch"):
        ledger_batch[int(r[0])].append((int(r[1]), int(r[2]), json.loads(r[3])))
    limits = {r[0]: r for r in rows(ci, """select queue, global_concurrency, rate,
            rate_period_ms, burst from pgjob.limits""")}
    weights = {(r[0], r[1]): int(r[2]) for r in
               rows(ci, "select queue, key, weight from pgjob.limit_weights")}

    # Every start of a job: (job, token) -> (start, end or None, worker).
    # The attempts' rows hold every attempt that did not end done; the
    # job's own columns its last.
    # A lost attempt's end is its lease's (pgjob.attempt_ended()): a limit
    # counts a job until its end is written or its lease expires.
    starts = {}
    for jid, al in attempts.items():
        for t in al:
            starts[(jid, t["token"])] = (t["start"], t["end"], t["worker"], t["outcome"])
    for j in jobs.values():
        if j["attempted"] is not None and (j["id"], j["token"]) not in starts:
            starts[(j["id"], j["token"])] = (j["attempted"], j["finished"],
                                             j["worker"], j["state"])

    # ---- no job lost ----------------------------------------------------
    missing = sorted(committed - set(jobs))
    pruned = set()
    if a.soak:
        # Pruned after it ran: its ledger row or line is there.
        exec_ids = set()
        with open(os.path.join(d, "exec.ledger")) as f:
            for line in f:
                p = line.split()
                if p:
                    exec_ids.add(int(p[0]))
        pruned = {m for m in missing if m in ledger_sql or m in exec_ids}
        missing = [m for m in missing if m not in pruned]
        for jid, toks in ledger_sql.items():
            if jid not in jobs and len(toks) != 1:
                fail(f"sql job {jid} (pruned) has {len(toks)} ledger rows, want 1")
    if missing:
        fail(f"{len(missing)} committed jobs are missing: {missing[:10]}")
    dead_parents = set()
    for jid, al in attempts.items():
        if any(t["outcome"] == "dead" for t in al):
            dead_parents.add(jid)
    lost = 0
    for j in jobs.values():
        want = "done"
        if j["opf"] == "cancel" and any(p in dead_parents for p, c, _ in deps if c == j["id"]):
            want = "cancelled"
        if j["state"] != want:
            lost += 1
            if lost <= 10:
                fail(f"job {j['id']} ({j['kind']}, {j['queue']}, step {j['step']}) "
                     f"ended {j['state']}, want {want}")

    # ---- sql exactly once -------------------------------------------------
    sql_kinds = {"sqlj", "fqx", "schedj", "againsql"}
    for j in jobs.values():
        if j["kind"] not in sql_kinds:
            continue
        got = ledger_sql.get(j["id"], [])
        want = 1 if j["state"] == "done" else 0
        if len(got) != want:
            fail(f"sql job {j['id']} ({j['kind']}, step {j['step']}, {j['state']}) "
                 f"has {len(got)} ledger rows, want {want}")
        elif want and got[0] != j["token"]:
            fail(f"sql job {j['id']}: its ledger row has token {got[0]}, "
                 f"its final token is {j['token']}")
    for jid in ledger_sql:
        if (jid not in jobs and not a.soak) or (jid in jobs and jobs[jid]["kind"] not in sql_kinds):
            fail(f"ledger_sql row of job {jid}, not an sql job")

    # ---- exec at least once ---------------------------------------------
    exec_kinds = {"execj", "execslow", "gcx", "rlx", "failonce", "againj"}
    runs = []
    with open(os.path.join(d, "exec.ledger")) as f:
        for line in f:
            p = line.split()
            if len(p) != 5:
                fail(f"exec ledger: unreadable line {line.strip()[:80]}")
                continue
            runs.append(tuple(int(x) for x in p))  # id token s e pid
    by_job = collections.defaultdict(list)
    for r in runs:
        by_job[r[0]].append(r)

    def run_lost(r):
        jid, pid = r[0], r[4]
        return (pid == 1 or pid in faulted or pid not in worker_pids
                or (pid, jid) in lost_marks)

    duplicate_runs = overlaps = 0
    for j in jobs.values():
        if j["kind"] not in exec_kinds:
            continue
        rl = sorted(by_job.get(j["id"], []), key=lambda r: (r[1], r[2]))
        if j["state"] == "done" and not any(r[1] == j["token"] for r in rl):
            fail(f"exec job {j['id']} ({j['kind']}): no ledger line under its final token {j['token']}")
        duplicate_runs += max(0, len(rl) - 1)
        for k, r in enumerate(rl):
            if r[1] > j["token"]:
                fail(f"exec job {j['id']}: a run under token {r[1]}, above its final {j['token']}")
            if k and rl[k - 1][1] == r[1]:
                fail(f"exec job {j['id']} ran twice under token {r[1]} (workers {rl[k-1][4]}, {r[4]})")
            if r[1] < j["token"] and not run_lost(r):
                fail(f"exec job {j['id']}: a run under token {r[1]} (worker {r[4]}) completed, "
                     f"yet the job was claimed again, and nothing shows it lost its lease")
            for q in rl[k + 1:]:
                if q[1] != r[1] and r[3] > q[2] and q[3] > r[2]:
                    overlaps += 1
                    if not run_lost(r):
                        fail(f"exec job {j['id']}: runs under tokens {r[1]} and {q[1]} overlap")
    for jid in by_job:
        if (jid not in jobs and not a.soak) or (jid in jobs and jobs[jid]["kind"] not in exec_kinds):
            fail(f"exec ledger line of job {jid}, not an exec job")

    # ---- workflows --------------------------------------------------------
    parents_of = collections.defaultdict(list)
    for p, c, res in deps:
        parents_of[c].append(p)
    first_start = {}
    for (jid, _tok), s in starts.items():
        if s[0] is not None and (jid not in first_start or s[0] < first_start[jid]):
            first_start[jid] = s[0]
    first_end_dead = {}
    for jid in dead_parents:
        first_end_dead[jid] = min(t["end"] for t in attempts[jid] if t["outcome"] == "dead")
    wf_ids = {j["wf"] for j in jobs.values() if j["wf"] is not None}
    if len(wf_ids) != workflows_made and not a.soak:
        fail(f"{workflows_made} workflows committed, {len(wf_ids)} in the jobs")
    released = policy = 0
    for c, ps in parents_of.items():
        child = jobs.get(c)
        if child is None:
            continue
        if child["state"] == "cancelled":
            if c in first_start:
                fail(f"job {c} was cancelled by its parent's death, yet it started")
            policy += 1
            continue
        released += 1
        if c not in first_start:
            continue
        # Released only once every parent ended: done, or dead for a
        # child that runs anyway; a wait child after the retry's done.
        for p in ps:
            pj = jobs.get(p)
            if pj is None:
                continue
            if child["opf"] == "run" and p in first_end_dead:
                end = first_end_dead[p]
            else:
                end = pj["finished"]
            if end is None or first_start[c] < end:
                fail(f"job {c} (step {child['step']}, {child['opf']}) started before "
                     f"its parent {p} (step {pj['step']}) ended")
        pg = child["payload"].get("pgjob", {})
        dead_ps = [p for p in ps if p in dead_parents]
        if child["opf"] == "run" and dead_ps:
            failed = pg.get("failed", {})
            for p in dead_ps:
                if jobs[p]["step"] not in failed:
                    fail(f"job {c} (run policy) ran without its dead parent "
                         f"{jobs[p]['step']} under pgjob.failed")
            policy += 1
        elif child["opf"] == "wait" and dead_ps:
            if not all(jobs.get(p, {}).get("state", "done") == "done" for p in ps):
                fail(f"job {c} (wait policy) ran though a parent is not done")
            policy += 1
        if child["step"] == "c" and sorted(pg.get("parents", {})) != ["b1", "b2", "b3"]:
            fail(f"fan-in job {c}: parents' results {sorted(pg.get('parents', {}))}")
    for p, c, res in deps:
        if res is None and jobs.get(p, {}).get("state") in ("done", "dead", "cancelled"):
            fail(f"edge {p} -> {c}: the parent ended {jobs[p]['state']} and the edge is unresolved")

    # ---- batches ----------------------------------------------------------
    callbacks = collections.Counter()
    for j in jobs.values():
        if j["kind"] == "batchcb":
            callbacks[j["payload"].get("pgjob", {}).get("batch", {}).get("id")] += 1
    for b in batches:
        bid = int(b[0])
        members = [j for j in jobs.values() if j["batch"] == bid]
        if b[1] != "t" or b[6] is None or b[7] is None:
            fail(f"batch {bid}: sealed {b[1]}, callback {b[6]}, finished {b[7]}")
        if callbacks[bid] != 1:
            fail(f"batch {bid}: {callbacks[bid]} callback jobs, want 1")
        lb = ledger_batch.get(bid, [])
        if len(lb) != 1:
            fail(f"batch {bid}: its callback ran {len(lb)} times, want 1")
            continue
        counts = lb[0][2]
        # Its jobs as enqueued (batch_members), the soak's pruned ones
        # among them: a pruned sql job with its ledger row was done.
        ids = batch_members.get(bid) or [j["id"] for j in members]
        done = sum(1 for i in ids
                   if (jobs[i]["state"] == "done" if i in jobs else i in pruned))
        if counts.get("total") != len(ids) or counts.get("done") != done:
            fail(f"batch {bid}: callback told total {counts.get('total')} done "
                 f"{counts.get('done')}, the batch has {len(ids)} jobs, {done} done"
                 f" ({len(ids) - len(members)} of them pruned)")
    for bid, lb in ledger_batch.items():
        if len(lb) != 1:
            fail(f"batch {bid}: {len(lb)} callback runs in the ledger, want 1")
    joined = sum(int(x[0]) for x in ev["batches_joined"])

    # ---- concurrency --------------------------------------------------------
    samples_q = collections.defaultdict(int)
    tokens_seen, leases_seen = {}, {}
    token_back = 0
    nsamples = set()
    with open(os.path.join(d, "samples")) as f:
        for line in f:
            p = line.split()
            if len(p) < 4:
                continue
            if p[0] == "Q" and len(p) == 5:
                nsamples.add(p[1])
                samples_q[p[2]] = max(samples_q[p[2]], int(p[3]))
            elif p[0] in ("T", "L"):
                seen = tokens_seen if p[0] == "T" else leases_seen
                key, tok = p[2], int(p[3])
                if key in seen and tok < seen[key]:
                    token_back += 1
                    fail(f"{'job' if p[0] == 'T' else 'lease'} {key}: token went back "
                         f"from {seen[key]} to {tok}")
                seen[key] = max(tok, seen.get(key, tok))

    def limit_of(q, col):
        r = limits.get(q)
        return int(r[col]) if r and r[col] is not None else None

    # A run of a worker stopped past its lease, or one that overlapped
    # such a run: the stopped worker's handler runs on (docs/faults.md,
    # finding 3), and its late end may come after its slot was given to
    # another job.
    def stopped_at(worker, s, e, pid=None):
        for slot, spid, t0, t1 in stop_windows:
            if (worker == slot or pid == spid) and (t1 is None or s < t1) and (e is None or e > t0):
                return True
        return False

    def max_overlap(iv):
        pts = []
        for s, e in iv:
            pts.append((s, 1))
            pts.append((e, -1))
        pts.sort(key=lambda x: (x[0], x[1]))
        cur = best = 0
        at = None
        for t, dlt in pts:
            cur += dlt
            if cur > best:
                best, at = cur, t
        return best, at

    conc = {}
    for q in ("gc", "fq"):
        lim = limit_of(q, 1)
        if lim is None:
            fail(f"queue {q} has no global_concurrency in pgjob.limits")
            continue
        if samples_q[q] > lim:
            fail(f"queue {q}: {samples_q[q]} jobs running under a lease that holds, "
                 f"limit {lim} (sampled)")
        # From the attempts' times: the claim reads its clock (attempted_at)
        # before it counts the running jobs, and an end's finished_at is its
        # transaction's start, before its commit: so an end a few ms after
        # a claim's clock may have been counted by that claim, and the
        # intervals alone overlap where nothing ran over the limit.  Sound
        # instead: each claim (its jobs share the clock) against the
        # attempts claimed before it whose end (or lease's end, for a lost
        # one) is after a moment when a job of that claim already ran (its
        # handler's start in the exec ledger, its sql row), so after the
        # claim's count.  Those were running when it counted, and with the
        # claim's own jobs they must not pass the limit.
        point = {}
        for r in runs:
            k = (r[0], r[1])
            point[k] = min(point.get(k, r[2] // 1000), r[2] // 1000)
        point.update(sql_at)
        claims = collections.defaultdict(list)
        mine = []
        for (jid, tok), (st0, e, w, outcome) in starts.items():
            if jobs.get(jid, {}).get("queue") != q or st0 is None:
                continue
            claims[st0].append((jid, tok))
            if e is not None and not stopped_at(w, st0, e):
                mine.append((st0, e))
        mine.sort()
        db_max, worst = 0, ""
        for clk, members in claims.items():
            pts = [point[m] for m in members if m in point]
            if not pts:
                continue
            p0 = min(pts)
            held = sum(1 for st0, e in mine if st0 < clk and e >= p0)
            if held + len(members) > db_max:
                db_max = held + len(members)
                worst = f"claim of {members} at {clk}: {held} running before it"
        if db_max > lim:
            fail(f"queue {q}: {db_max} attempts at once by the attempts' times, "
                 f"limit {lim} ({worst})")
        iv_h = [(r[2] // 1000, r[3] // 1000) for r in runs
                if jobs.get(r[0], {}).get("queue") == q
                and not stopped_at(None, r[2] // 1000, r[3] // 1000, r[4])]
        h_max, _ = max_overlap(iv_h)
        if h_max > lim:
            fail(f"queue {q}: {h_max} handlers ran at once (exec ledger), limit {lim}")
        conc[q] = f"{samples_q[q]}/{db_max}/{h_max}/{lim}"

    # ---- rate ------------------------------------------------------------------
    rate_excess = None
    if "rl" in limits:
        rate, period, burst = limit_of("rl", 2), limit_of("rl", 3), limit_of("rl", 4)
        st = sorted((s[0], jobs[jid]["cost"]) for (jid, tok), s in starts.items()
                    if jobs.get(jid, {}).get("queue") == "rl" and s[0] is not None)
        # max over i <= j of cost(i..j) - rate * (t_j - t_i) / period
        # must not pass burst.
        r_us = rate / (period * 1000.0)
        best = None
        run_min = None
        total = 0
        for t, cost in st:
            cand = total - r_us * t  # S_{i-1} - r t_i
            run_min = cand if run_min is None else min(run_min, cand)
            total += cost
            v = (total - r_us * t) - run_min
            best = v if best is None else max(best, v)
        rate_excess = 0.0 if best is None else best - burst
        if best is not None and best > burst + 1e-6:
            fail(f"queue rl: starts cost {best:.3f} in a stretch where the bucket "
                 f"allows {burst} + {rate}/{period} ms x its length")

    # ---- fairness ----------------------------------------------------------------
    fq_starts = sorted((first_start[j["id"]], j["id"]) for j in jobs.values()
                       if j["queue"] == "fq" and j["id"] in first_start)
    lost_fq = sum(1 for (jid, tok), s in starts.items()
                  if jobs.get(jid, {}).get("queue") == "fq" and s[3] == "lost")
    keys = sorted({j["key"] for j in jobs.values() if j["queue"] == "fq"})
    w = {k: weights.get(("fq", k), 1) for k in keys}
    pending = collections.Counter()
    # Jobs of a key waiting at a time: created, not yet started.
    events_f = sorted([(j["created"], 0, j["key"]) for j in jobs.values() if j["queue"] == "fq"]
                      + [(t, 1, jobs[jid]["key"]) for t, jid in fq_starts])
    cnt = collections.Counter()
    since = {}
    lead = 0.0
    both_waiting = collections.Counter()
    for t, kind, k in events_f:
        if kind == 0:
            if pending[k] == 0:
                since[k] = dict(cnt)
            pending[k] += 1
            continue
        if pending["heavy"] > 0 and pending["light"] > 0:
            both_waiting[k] += 1
        cnt[k] += 1
        pending[k] -= 1
        for b, snap in list(since.items()):
            if pending[b] <= 0 and b != k:
                continue
            # b gets at least one start per turn, m at most its weight.
            mine = cnt[b] - snap.get(b, 0)
            for m in keys:
                if m != b:
                    lead = max(lead, (cnt[m] - snap.get(m, 0)) / w[m] - mine)
        if pending[k] == 0:
            since.pop(k, None)
    # A round gives each key its weight; a claim may end inside a round,
    # and a lost run's job is claimed again where it stands.
    bound = 2 + lost_fq
    if lead > bound:
        fail(f"queue fq: a key got {lead:.1f} rounds of starts ahead of a key with "
             f"jobs waiting (bound {bound})")
    # Starts of heavy per start of light while both had jobs waiting.
    hh, ll = both_waiting["heavy"], both_waiting["light"]
    ratio = hh / ll if ll else 0
    # The weights themselves: in the chaos run both keys' jobs are enqueued
    # together, so while both have jobs waiting heavy gets its weight of
    # starts per start of light (a round cut short where a claim ends, or a
    # lost run claimed again, moves it by one at most).  The soak enqueues
    # one a second: they rarely both wait.
    if not a.soak and "heavy" in w and "light" in w and ll >= 5:
        want = w["heavy"] / w["light"]
        if abs(ratio - want) > 1:
            fail(f"queue fq: heavy (weight {w['heavy']}) got {ratio:.2f} starts per start of "
                 f"light (weight {w['light']}) while both had jobs waiting, not {want:g}")

    # ---- pause --------------------------------------------------------------------
    paused_starts = 0
    for (q, t0), (q2, t1) in zip(ev["paused"], ev["resuming"]):
        a0, a1 = iso_us(t0), iso_us(t1)
        for (jid, tok), s in starts.items():
            if jobs.get(jid, {}).get("queue") == q and s[0] is not None and a0 < s[0] < a1:
                paused_starts += 1
                fail(f"job {jid} of queue {q} started while the queue was paused")

    # ---- schedules --------------------------------------------------------------------
    ticks = collections.Counter()
    run_jobs = collections.Counter()
    disabled_ticks = 0
    for j in jobs.values():
        if j["kind"] != "schedj":
            continue
        pg = j["payload"].get("pgjob", {})
        if "tick" in pg:
            ticks[(pg["schedule"], pg["tick"])] += 1
            for (nm, t0), (nm2, t1) in zip(ev["disabled"], ev["enabling"]):
                if pg["schedule"] == nm and iso_us(t0) < iso_us(pg["tick"].replace("Z", ".000000Z")) < iso_us(t1):
                    disabled_ticks += 1
                    fail(f"schedule {nm}: a job for the tick {pg['tick']}, while it was disabled")
        elif "run_requested_at" in pg:
            run_jobs[(pg["schedule"], pg["run_requested_at"])] += 1
        else:
            fail(f"schedule job {j['id']} names neither a tick nor a run: {pg}")
    for k, n in list(ticks.items()) + list(run_jobs.items()):
        if n != 1:
            fail(f"schedule {k[0]}: {n} jobs for {k[1]}")
    asked = collections.Counter(x[0] for x in ev["run_requested"])
    for nm, n in asked.items():
        got = sum(1 for k in run_jobs if k[0] == nm)
        if (got < 1 and not a.soak) or got > n:
            fail(f"schedule {nm}: {n} runs asked for, {got} jobs made")

    # ---- PostgreSQL restarts: every worker connected again ----------------
    pg_rec = [int(x[0]) for x in ev["pgrestart"] if x]
    for r in pg_rec:
        if r < 0:
            fail("after a PostgreSQL restart the workers connected before it did not "
                 "all connect again and end a job within 60 s")

    # ---- figures ------------------------------------------------------------------------
    kills = sum(1 for x in ev["faulted"] if x[1] == "kill9")
    # Workers killed with their supervisor (one line per worker).
    supk = sum(1 for x in ev["faulted"] if x[1] == "kill9sup")
    stops = sum(1 for x in ev["faulted"] if x[1] == "sigstop")
    nfaults = kills + stops + len(ev["pgrestart"]) + len(ev["connreset"])
    lost += len(missing)
    line = (f"scenario={a.scenario} jobs={len(jobs) + len(pruned)} faults={nfaults} lost={lost} "
            f"duplicate_runs={duplicate_runs} overlaps={overlaps} lease_lost_logged={lease_lost_lines} "
            f"worker_kills={kills} supervisor_kill_workers={supk} stops={stops} "
            f"pg_restarts={len(ev['pgrestart'])} pg_recovery_ms={max(pg_rec, default=0)} conn_resets={len(ev['connreset'])} "
            f"workflows={len(wf_ids)} children_released={released} by_policy={policy} "
            f"batches={len(batches)} joined_running={joined} callbacks={sum(callbacks.values())} "
            f"bulk_retried={sum(int(x[0]) for x in ev['bulk_retry'] if x[0].isdigit())} "
            f"gc_running={conc.get('gc', '-')} fq_running={conc.get('fq', '-')} "
            f"rate_excess={'-' if rate_excess is None else f'{rate_excess:.2f}'} "
            f"fair_lead={lead:.1f}/{bound} heavy_per_light={ratio:.2f} "
            f"paused_starts={paused_starts} ticks={len(ticks)} runs={sum(run_jobs.values())}/{sum(asked.values())} "
            f"disabled_ticks={disabled_ticks} token_regressions={token_back} samples={len(nsamples)} "
            f"wall_s={a.wall_ms / 1000:.1f}")
    print(line)
    sys.stdout.flush()
    if a.figures:
        with open(a.figures, "a") as f:
            f.write(line + "\n")
    if fails:
        print(f"{len(fails)} invariant(s) broken (logs in {d})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
