#!/usr/bin/env python3
"""
int.test_roles: the database roles of docs/security.md, with exactly the
GRANTs that page gives (its SQL blocks marked <!-- run -->, read from the
page at test time, the role names swapped for this run's), against a real
pgjobd, real `pgjob` commands and a real `pgjob web` on the test
PostgreSQL (the `pg` fixture).

- The worker role runs pgjobd, every `pgjob` command but `migrate`, and
  the console: each read and each action must succeed.
- The enqueue-only role runs `pgjob enqueue`, `pgjob enqueue --file` and
  `pgjob workflow submit`; every other command must fail with a clear
  `permission denied` (exit 1), and `pgjob web` does not start.
- A page that needs a right the role lacks answers 403 with the
  database's `permission denied`, never a 500.

Roles belong to the server: their names carry this process's pid, and
they are dropped at the end.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import webtest  # noqa: E402
from webtest import BIN, CI, PGJOB, PGJOBD, check, psql, started  # noqa: E402,F401

SRC = os.environ["PGJOBD_SOURCE"]
DBNAME = "t_roles"
DB = re.sub(r"dbname=\S+", "dbname=" + DBNAME, CI)
WORK = tempfile.mkdtemp(prefix="test_roles.")
WORKER = f"r_worker_{os.getpid()}"
ENQUEUE = f"r_enqueue_{os.getpid()}"


def as_role(role):
    return f"{DB} user={role}"


def wait_for(conninfo, sql, what, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if psql(conninfo, sql) == "t":
            return
        time.sleep(0.1)
    check(False, f"timed out waiting for {what}")


def doc_grants():
    """The <!-- run --> SQL blocks of docs/security.md, in order, with the
    documented role names replaced by this run's."""
    doc = open(os.path.join(SRC, "docs/security.md")).read()
    blocks = re.findall(r"<!-- run[^\n]*-->\n```sql\n(.*?)\n```", doc, re.S)
    # The roles, the worker's grants, the enqueuer's grants.
    check(len(blocks) >= 3, "docs/security.md has its GRANT blocks")
    return [b.replace("pgjobd_worker", WORKER).replace("app_enqueue", ENQUEUE)
            for b in blocks]


def pgjob(role, *args, stdin=None):
    r = subprocess.run([PGJOB, "--database", as_role(role)] + list(args),
                       capture_output=True, text=True, input=stdin,
                       timeout=120)
    return r.returncode, r.stdout, r.stderr


def may(role, *args, ok=(0,)):
    rc, out, err = pgjob(role, *args)
    check(rc in ok and "permission denied" not in out + err,
          f"{role}: pgjob {' '.join(args)}: exit {rc}: {out}{err}")
    return out


def may_not(role, *args):
    rc, out, err = pgjob(role, *args)
    # A refusal the reader understands, and no crash or usage error.
    check(rc != 0 and rc < 64 and "permission denied" in out + err,
          f"{role}: pgjob {' '.join(args)} should be refused: exit {rc}: "
          f"{out}{err}")


class Web:
    """A running open `pgjob web` as role, on a free loopback port."""

    def __init__(self, role):
        self.log = os.path.join(WORK, f"web_{role}.log")
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                [PGJOB, "--database", as_role(role), "web", "--listen",
                 "127.0.0.1:0"], stderr=err, stdout=subprocess.DEVNULL)
        started.append(self.proc)
        self.port = None
        while self.port is None and self.proc.poll() is None:
            m = re.search(r"console at http://127\.0\.0\.1:(\d+)/",
                          open(self.log).read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        check(self.port is not None, f"pgjob web as {role} started")
        st, body = self.req("GET", "/api/session")
        check(st == 200, f"GET /api/session as {role}: {st}")
        self.cookie = self.set_cookie
        self.csrf = body["csrf"]

    def req(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        h = {"Host": f"127.0.0.1:{self.port}"}
        if getattr(self, "cookie", None):
            h["Cookie"] = "pgjob_session=" + self.cookie
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
            h["X-CSRF-Token"] = self.csrf
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        m = re.match(r"pgjob_session=([0-9a-f]+);",
                     r.getheader("Set-Cookie") or "")
        if m:
            self.set_cookie = m.group(1)
        c.close()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        check(self.proc.wait(30) == 0, "pgjob web stopped cleanly")


def setup():
    psql(CI, f"drop database if exists {DBNAME}", f"create database {DBNAME}")
    subprocess.run([PGJOB, "--database", DB, "migrate"], check=True,
                   stdout=subprocess.DEVNULL)
    for sql in doc_grants():
        psql(DB, sql)


def start_daemon():
    """pgjobd as the worker role: a handler that works, one that fails
    for good, and a schedule that ticks once a year."""
    cfg = os.path.join(WORK, "pgjobd.yaml")
    with open(cfg, "w") as f:
        f.write(f'database:\n  conninfo: "{as_role(WORKER)}"\n'
                "workers: 1\n"
                "queues:\n  other: {}\n"
                "handlers:\n"
                "  ok: { type: exec, command: [/bin/true] }\n"
                "  bad: { type: exec, command: [/bin/false], "
                "max_attempts: 1 }\n"
                "  report: { type: exec, command: [/bin/true], "
                "queue: other }\n"
                "schedules:\n"
                "  yearly: { cron: \"0 0 1 1 *\", kind: ok }\n")
    log = open(os.path.join(WORK, "pgjobd.log"), "w")
    p = subprocess.Popen([PGJOBD, "-c", cfg], stdout=log, stderr=log)
    started.append(p)
    wait_for(DB, "select exists (select 1 from pgjob.workers where "
             "heartbeat_at > now() - interval '30 seconds' and "
             "schedules ? 'yearly')", "the worker's row")
    return p


WORKFLOW = json.dumps({"name": "roles", "steps": [
    {"name": "a", "kind": "ok"},
    {"name": "b", "kind": "ok", "after": ["a"]}]})


def test_worker_role():
    w = WORKER
    jobfile = os.path.join(WORK, "jobs.jsonl")
    with open(jobfile, "w") as f:
        f.write('{"kind": "ok"}\n{"kind": "ok", "queue": "other"}\n')
    wf_file = os.path.join(WORK, "wf.json")
    with open(wf_file, "w") as f:
        f.write(WORKFLOW)

    done = may(w, "enqueue", "ok", "{}").strip()
    dead = may(w, "enqueue", "bad", "{}").strip()
    may(w, "enqueue", "--file", jobfile)
    wf = may(w, "workflow", "submit", wf_file).strip()
    wait_for(DB, f"select state = 'done' from pgjob.all_jobs where id = "
             f"{done}", "a job done")
    wait_for(DB, f"select state = 'dead' from pgjob.all_jobs where id = "
             f"{dead}", "a job dead")
    wait_for(DB, f"select count(*) = 2 from pgjob.all_jobs where "
             f"workflow_id = {wf} and state = 'done'", "the workflow done")

    # Every read.
    for args in (["status"], ["status", "--json"], ["jobs"],
                 ["jobs", "--state", "dead"], ["show", done],
                 ["show", dead, "--json"], ["limits"], ["limits", "default"],
                 ["schedules"], ["schedules", "--json"], ["top", "--once"],
                 ["workflow", "show", wf], ["migrate", "--status"],
                 ["version"]):
        may(w, *args)
    # doctor may warn (exit 1) about the database; it must read it all.
    may(w, "doctor", ok=(0, 1))
    # Every action.
    may(w, "retry", dead)
    may(w, "retry", "--dead")
    later = may(w, "enqueue", "ok", "{}", "--in", "1h").strip()
    may(w, "cancel", later)
    may(w, "pause", "other")
    may(w, "resume", "other")
    may(w, "limits", "other", "--set", "rate=10/s")
    may(w, "limits", "other", "--reset")
    may(w, "schedule", "disable", "yearly")
    may(w, "schedule", "enable", "yearly")
    may(w, "schedule", "run", "yearly")
    wf2 = may(w, "workflow", "submit", wf_file).strip()
    may(w, "workflow", "cancel", wf2)

    # The console as the worker role: every page and every action.
    web = Web(w)
    later = may(w, "enqueue", "ok", "{}", "--in", "1h").strip()
    for path in ("/api/overview", "/api/jobs", "/api/jobs?state=available",
                 "/api/jobs/count", f"/api/job/{later}", "/api/queues",
                 "/api/schedules", "/api/tasks", "/api/workflows",
                 f"/api/workflow/{wf}"):
        st, body = web.req("GET", path)
        check(st == 200, f"console as {w}: GET {path}: {st} {body}")
    for path, body in (
            ("/api/jobs/cancel", {"ids": [int(later)]}),
            ("/api/jobs/retry", {"ids": [int(later)]}),
            ("/api/jobs/delete", {"ids": [int(later)]}),
            ("/api/queues/pause", {"queue": "other"}),
            ("/api/queues/resume", {"queue": "other"}),
            ("/api/queues/limits", {"queue": "other",
                                    "set": {"rate": "5/s"}}),
            ("/api/queues/limits", {"queue": "other", "reset": True}),
            ("/api/schedules/enable", {"name": "yearly", "enabled": False}),
            ("/api/schedules/enable", {"name": "yearly", "enabled": True}),
            ("/api/schedules/run", {"name": "yearly"})):
        st, answer = web.req("POST", path, body)
        check(st == 200, f"console as {w}: POST {path}: {st} {answer}")
    # A right the role lacks (the grants not run again after an
    # upgrade): the page says so, 403, and the console goes on.
    psql(DB, f"revoke select on pgjob.attempts from {w}")
    st, body = web.req("GET", f"/api/job/{done}")
    check(st == 403 and "permission denied for table attempts" in
          body.get("error", ""), f"console without a grant: {st} {body}")
    psql(DB, f"grant select on pgjob.attempts to {w}")
    st, body = web.req("GET", f"/api/job/{done}")
    check(st == 200, f"console with the grant again: {st} {body}")
    web.stop()
    may(w, "prune", "--older-than", "1ms")


def test_enqueue_role():
    e = ENQUEUE
    jobfile = os.path.join(WORK, "jobs.jsonl")
    wf_file = os.path.join(WORK, "wf.json")
    job = may(e, "enqueue", "ok", "{}", "--in", "1h").strip()
    may(e, "enqueue", "--file", jobfile)
    may(e, "workflow", "submit", wf_file)
    may(e, "version")
    # A queue no live worker serves: enqueued, with a warning (the role
    # may ask pgjob.queue_served(), and nothing else of the workers).
    rc, out, err = pgjob(e, "enqueue", "ok", "{}", "--queue", "nosuch")
    check(rc == 0 and out.strip().isdigit() and
          'warning: no live worker serves queue "nosuch"' in err,
          f"{e}: enqueue to an unserved queue: exit {rc}: {out}{err}")
    for args in (["status"], ["jobs"], ["show", job], ["limits"],
                 ["schedules"], ["top", "--once"], ["workflow", "show", "1"],
                 ["retry", job], ["retry", "--dead"], ["cancel", job],
                 ["pause", "other"], ["resume", "other"],
                 ["limits", "other", "--set", "rate=10/s"],
                 ["schedule", "run", "yearly"],
                 ["schedule", "disable", "yearly"],
                 ["workflow", "cancel", "1"], ["prune"], ["doctor"]):
        may_not(e, *args)

    # The console as the enqueue role: it does not start, and says why.
    log = os.path.join(WORK, "web_enqueue.log")
    with open(log, "w") as err:
        rc = subprocess.run([PGJOB, "--database", as_role(e), "web",
                             "--listen", "127.0.0.1:0"], stderr=err,
                            stdout=subprocess.DEVNULL, timeout=60).returncode
    text = open(log).read()
    check(rc == 1 and "permission denied" in text,
          f"pgjob web as {e}: exit {rc}: {text}")
    check(psql(DB, f"select state from pgjob.all_jobs where id = {job}")
          == "available", "the enqueue role changed nothing")


def main():
    setup()
    try:
        daemon = start_daemon()
        test_worker_role()
        test_enqueue_role()
        daemon.send_signal(signal.SIGTERM)
        check(daemon.wait(60) == 0, "pgjobd stopped cleanly")
        # pgjobd ran as the worker role: every duty and claim had its
        # rights (a missing one is logged as 42501).
        text = open(os.path.join(WORK, "pgjobd.log")).read()
        check("42501" not in text and "permission denied" not in text,
              f"pgjobd as {WORKER} lacked a right: {text}")
    finally:
        webtest.stop_all()
        subprocess.run(["psql", CI, "-qAtX", "-c",
                        f"drop database if exists {DBNAME}", "-c",
                        f"drop role if exists {WORKER}", "-c",
                        f"drop role if exists {ENQUEUE}"],
                       capture_output=True)
    print(f"test_roles: {webtest.checks} checks passed")


if __name__ == "__main__":
    main()
