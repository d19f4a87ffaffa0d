#!/usr/bin/env python3
"""
int.test_web_abuse: the web console against the abuse a review found (docs/security.md),
each against a real `pgjob web`, the test PostgreSQL and real HTTP
(Python's standard library only; several loopback source addresses,
127.0.0.2 ..., stand for several clients: Linux routes all of 127/8 to lo).

- session_other_port: a page served by another port of the same host gets
  the session cookie (cookies are not port-bound); with it, a second real
  server on another port gets no CSRF token from GET /api/session, no read
  of the API and no action; the page's own token (from the login's answer)
  still acts.
- slowloris: connections that send their head a byte at a time, from three
  addresses, do not keep a legitimate request from its answer, and one is
  closed before its head is whole; a body likewise.
- public_url_without_users: refused by `pgjobd --check-config` and `pgjob
  web`, at its place in the file.
- open_console_start_line: the open console's start line says that every
  local user is an operator.
- login_lockout: failed logins from many addresses do not refuse the right
  password from an address that has not failed.
- session_flood: 1,100 new anonymous sessions do not end a login in
  progress.
- bulk_expect: a bulk action refuses (409, with the count) when more jobs
  match than the operator confirmed, and a malformed expect (400).
- cancel_running: the job page's cancel of a running job, as `pgjob
  cancel` does it.
- retry_rules: the console's retry and `pgjob retry` follow one set of
  rules (sql/upgrade/033_job_actions.sql): a done job runs again; of the jobs with
  one unique_key, the holder or else the newest is retried, never a second
  holder, by ids and by a filter alike.

`python3 test_web_abuse.py NAME...` runs only those.
"""
import http.client
import http.server
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import webtest  # noqa: E402
from webtest import BIN, CI, PGJOB, PGJOBD, check, started  # noqa: E402,F401

DB = CI.replace("dbname=postgres", "dbname=t_web_abuse")
WORK = tempfile.mkdtemp(prefix="test_web_abuse.")
DEADLINE_S = 120  # for anything waited for; never reached when it works


def psql(*sql):
    return webtest.psql(DB, *sql)


def hash_password(pw):
    r = subprocess.run([PGJOB, "web", "--hash-password"], input=pw + "\n",
                       capture_output=True, text=True)
    check(r.returncode == 0, f"--hash-password: {r.stderr}")
    return r.stdout.strip()


def enqueue(kind, queue="abuseq", *extra):
    return int(subprocess.run(
        [PGJOB, "--database", DB, "enqueue", kind, "{}", "--queue", queue,
         *extra], check=True, capture_output=True, text=True).stdout.strip())


class Web:
    """A running `pgjob web` on a free loopback port."""

    def __init__(self, config=None, name="web"):
        self.log = os.path.join(WORK, name + ".log")
        args = [PGJOB]
        if config is not None:
            self.config = os.path.join(WORK, name + ".yaml")
            with open(self.config, "w") as f:
                f.write(config)
            args += ["-c", self.config]
        args += ["--database", DB, "web", "--listen", "127.0.0.1:0"]
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(args, stderr=err,
                                         stdout=subprocess.DEVNULL)
        started.append(self.proc)
        self.port = None
        while self.port is None and self.proc.poll() is None:
            m = re.search(r"console at http://127\.0\.0\.1:(\d+)/",
                          open(self.log).read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        check(self.port, f"{name} starts: {self.text()}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait()

    def text(self):
        return open(self.log, errors="replace").read()

    def req(self, method, path, body=None, headers=None, cookie=None,
            source="127.0.0.1"):
        h = dict(headers or {})
        if cookie:
            h["Cookie"] = "pgjob_session=" + cookie
        c = http.client.HTTPConnection("127.0.0.1", self.port,
                                       source_address=(source, 0),
                                       timeout=DEADLINE_S)
        c.putrequest(method, path, skip_host=True)
        c.putheader("Host", f"127.0.0.1:{self.port}")
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        for k, v in h.items():
            c.putheader(k, v)
        if body is not None:
            c.putheader("Content-Length", str(len(body)))
        c.endheaders(body)
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        try:
            data = json.loads(data)
        except ValueError:
            pass
        return r.status, hdrs, data

    def session(self, cookie=None, source="127.0.0.1", new=False):
        """GET /api/session: (cookie, its answer)."""
        st, h, data = self.req("GET", "/api/session" +
                               ("?new=1" if new else ""), cookie=cookie,
                               source=source)
        check(st == 200, f"GET /api/session: {st} {data}")
        m = re.match(r"pgjob_session=([0-9a-f]{64});", h.get("set-cookie", ""))
        return (m.group(1) if m else cookie), data

    def post(self, path, body, cookie, csrf, source="127.0.0.1",
             extra=None):
        h = {"Content-Type": "application/json"}
        if csrf:
            h["X-CSRF-Token"] = csrf
        h.update(extra or {})
        return self.req("POST", path, body, h, cookie, source)

    def login(self, user, password, source="127.0.0.1"):
        """(status, answer, cookie of the logged-in session or None)."""
        cookie, s = self.session(source=source)
        st, h, data = self.post("/api/login",
                                {"user": user, "password": password},
                                cookie, s.get("csrf"), source)
        m = re.match(r"pgjob_session=([0-9a-f]{64});", h.get("set-cookie", ""))
        return st, h, data, m.group(1) if m else None


def users_config(alice, bob=None):
    c = f"""
web:
  users:
    - name: alice
      password_hash: "{alice}"
      role: operator
"""
    if bob:
        c += f"""    - name: bob
      password_hash: "{bob}"
      role: operator
"""
    return c


def paused(queue):
    return psql("select coalesce((select paused from pgjob.limits "
                f"where queue = '{queue}'), false)") == "t"


# ---- 5: the session from another port -----------------------------------

class Evil(http.server.BaseHTTPRequestHandler):
    """Another local server: what a browser sends it (the console's cookie
    too, as cookies are not port-bound), it uses against the console."""
    console = None
    found = {}

    def log_message(self, *a):
        pass

    def do_GET(self):
        w, origin = Evil.console, f"http://127.0.0.1:{self.server.port}"
        m = re.search(r"pgjob_session=([0-9a-f]{64})",
                      self.headers.get("Cookie", ""))
        f = Evil.found
        f["cookie"] = m.group(1) if m else None
        like_page = {"Origin": origin, "Referer": origin + "/",
                     "Accept": "application/json"}
        st, _, s = w.req("GET", "/api/session", headers=like_page,
                         cookie=f["cookie"])
        f["session"] = (st, s)
        csrf = s.get("csrf") if isinstance(s, dict) else None
        f["read"] = w.req("GET", "/api/overview", headers=like_page,
                          cookie=f["cookie"])[0]
        f["pause"] = w.post("/api/queues/pause", {"queue": "abuseq"},
                            f["cookie"], csrf, extra=like_page)[0]
        f["pause_no_origin"] = w.post("/api/queues/pause",
                                      {"queue": "abuseq"}, f["cookie"],
                                      csrf)[0]
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def test_session_other_port(alice):
    w = Web(users_config(alice), name="other_port")
    st, _, s, cookie = w.login("alice", "alice pw")
    check(st == 200 and cookie and re.fullmatch("[0-9a-f]{64}", s["csrf"]),
          f"alice's login hands the page its token: {st} {s}")
    csrf = s["csrf"]

    srv = http.server.HTTPServer(("127.0.0.1", 0), Evil)
    srv.port = srv.server_address[1]
    Evil.console = w
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    # The browser visits the other port, and sends it the cookie.
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=DEADLINE_S)
    c.request("GET", "/", headers={"Cookie": "pgjob_session=" + cookie})
    c.getresponse().read()
    srv.shutdown()
    f = Evil.found
    check(f["cookie"] == cookie, "the other port got the cookie")
    st, s2 = f["session"]
    check(st == 200 and "csrf" not in s2,
          f"GET /api/session with only the cookie hands out no token: "
          f"{st} {s2}")
    check(f["read"] == 401, f"no read with only the cookie: {f['read']}")
    check(f["pause"] == 403 and f["pause_no_origin"] == 403,
          f"no action with only the cookie: {f['pause']} "
          f"{f['pause_no_origin']}")
    check(not paused("abuseq"), "the other port paused nothing")

    # The page itself, after a reload: its cookie shows who it is, and
    # the token it kept acts.
    st, _, s3 = w.req("GET", "/api/session", cookie=cookie)
    check(st == 200 and s3["user"] == "alice" and "csrf" not in s3,
          f"a reload's GET /api/session: {st} {s3}")
    st, _, d = w.req("GET", "/api/overview", cookie=cookie,
                     headers={"X-CSRF-Token": csrf})
    check(st == 200, f"the page reads with its token: {st} {d}")
    # A token that is not the session's (a page that kept one from before
    # a restart) gets a new session, not the cookie's: the cookie's own is
    # left as it was.
    st, h, s4 = w.req("GET", "/api/session", cookie=cookie,
                      headers={"X-CSRF-Token": "0" * 64})
    check(st == 200 and s4["user"] is None and s4.get("csrf") not in
          (None, csrf) and "pgjob_session=" in h.get("set-cookie", "") and
          cookie not in h["set-cookie"],
          f"a wrong token's GET /api/session: a new session: {st} {s4} {h}")
    st, _, d = w.post("/api/queues/pause", {"queue": "abuseq"}, cookie, csrf)
    check(st == 200 and paused("abuseq"), f"the page's pause: {st} {d}")
    st, _, _ = w.post("/api/queues/resume", {"queue": "abuseq"}, cookie,
                      csrf)
    check(st == 200 and not paused("abuseq"), f"resume: {st}")
    w.stop()
    log = w.text()

    # An open console restarted: the token a page kept is no longer its
    # session's, and GET /api/session hands it a new one.
    o = Web(name="open_restart")
    oc, os1 = o.session()
    o.stop()
    o = Web(name="open_restart2")
    st, h, os2 = o.req("GET", "/api/session", cookie=oc,
                       headers={"X-CSRF-Token": os1["csrf"]})
    check(st == 200 and os2.get("csrf") and os2["csrf"] != os1["csrf"],
          f"after a restart, a new session for the kept token: {os2}")
    o.stop()
    check("pause by alice: 403" in log and "pause by alice: 200" in log,
          "the log: the other port's pause refused, the page's done")


# ---- 6: slowloris ---------------------------------------------------------

def slow_head(port):
    """A whole request head; an attack sends its start, then a header that
    never ends."""
    return (f"GET /api/session HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"X-Slow: {'a' * 60}\r\n\r\n").encode()


def test_slowloris():
    w = Web(name="slowloris")
    HEAD = slow_head(w.port)
    sel = selectors.DefaultSelector()
    conns = {}  # socket -> bytes of HEAD sent
    opened = 0

    def open_one(src):
        nonlocal opened
        s = socket.socket()
        s.bind((src, 0))
        try:
            s.connect(("127.0.0.1", w.port))
        except OSError:
            s.close()
            return
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, src)
        conns[s] = 0
        opened += 1

    srcs = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    for src in srcs:
        for _ in range(32):
            open_one(src)

    # The legitimate request, in a thread: it waits for its answer.
    answer = {}

    def legit():
        try:
            answer["status"] = w.req("GET", "/api/session")[0]
        except OSError as e:
            answer["error"] = repr(e)
        answer["attack_open"] = len(conns)

    t = threading.Thread(target=legit, daemon=True)
    t.start()
    end = time.monotonic() + DEADLINE_S
    # A byte to each attacking connection every half second, its header
    # never ending; one the server closed is opened again (that is the
    # attack), until the legitimate request has its answer.
    while t.is_alive() and time.monotonic() < end:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                del conns[s]
                s.close()
                open_one(key.data)
        for s in list(conns):
            n = conns[s]
            try:
                s.send(HEAD[n:n + 1] if n < 60 else b"a")
                conns[s] += 1
            except OSError:
                pass
    t.join(timeout=1)
    check(answer.get("status") == 200 and answer["attack_open"] > 0,
          f"the legitimate request is answered while {opened} slow "
          f"connections were opened: {answer}")

    # One slow head alone: closed before the server has it whole.
    for s in list(conns):
        sel.unregister(s)
        s.close()
    conns.clear()
    s = socket.create_connection(("127.0.0.1", w.port))
    s.settimeout(DEADLINE_S)
    sent, got = 0, b""
    while sent < len(HEAD):
        try:
            s.send(HEAD[sent:sent + 1])
            sent += 1
        except OSError:
            break
        r, _, _ = select_one(s, 0.5)
        if r:
            got = s.recv(4096)
            break
    s.close()
    check(sent < len(HEAD) and not got.startswith(b"HTTP/1.1 200"),
          f"a head sent a byte each half second is cut off: {sent} of "
          f"{len(HEAD)} bytes sent, answer {got[:40]!r}")

    # A body likewise, its head sent whole.
    body = b'{"queue": "abuseq", "pad": "' + b"x" * 100 + b'"}'
    s = socket.create_connection(("127.0.0.1", w.port))
    s.settimeout(DEADLINE_S)
    s.sendall(f"POST /api/queues/pause HTTP/1.1\r\n"
              f"Host: 127.0.0.1:{w.port}\r\n"
              f"Content-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\n\r\n".encode())
    sent, got = 0, b""
    while sent < len(body):
        try:
            s.send(body[sent:sent + 1])
            sent += 1
        except OSError:
            break
        r, _, _ = select_one(s, 0.5)
        if r:
            got = s.recv(4096)
            break
    s.close()
    check(sent < len(body) and not got.startswith(b"HTTP/1.1"),
          f"a body sent a byte each half second is cut off: {sent} of "
          f"{len(body)} bytes sent, answer {got[:40]!r}")
    w.stop()


def select_one(s, timeout):
    import select
    return select.select([s], [], [], timeout)


# ---- 7: public_url without users ----------------------------------------

def test_public_url_without_users():
    path = os.path.join(WORK, "public_open.yaml")
    with open(path, "w") as f:
        f.write("web:\n  public_url: https://jobs.example.com\n")
    want = f"{path}:2:15: web.public_url: "
    r = subprocess.run([PGJOBD, "-c", path, "--check-config=static"],
                       capture_output=True, text=True)
    check(r.returncode == 78 and want in r.stderr and
          "web.users" in r.stderr,
          f"pgjobd --check-config: {r.returncode} {r.stderr}")
    p = subprocess.Popen([PGJOB, "-c", path, "--database", DB, "web"],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         text=True)
    started.append(p)
    try:
        _, err = p.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    check(p.returncode == 78 and want in err,
          f"pgjob web refuses to start: {p.returncode} {err}")


# ---- 8: the open console's start line -------------------------------------

def test_open_console_start_line():
    w = Web(name="open")
    w.stop()
    check(re.search(r"open: no web\.users, every local user of this host "
                    r"is an operator", w.text()),
          f"the start line says who may act: {w.text()}")


# ---- 9: failed logins do not lock everyone out -----------------------------

def test_login_lockout(alice, bob):
    w = Web(users_config(alice, bob), name="lockout")
    # 24 failures from four addresses, fast.
    for a in range(2, 6):
        for i in range(6):
            st, _, _, _ = w.login("alice", f"guess {i}",
                                  source=f"127.0.0.{a}")
            check(st in (401, 429), f"a failed login: {st}")
    st, _, _, _ = w.login("alice", "alice pw", source="127.0.0.2")
    check(st == 429, f"the failing address itself is held up: {st}")
    st, h, d, _ = w.login("alice", "alice pw", source="127.0.0.1")
    check(st == 200, f"alice from an address that never failed: {st} {d}")
    st, h, d, _ = w.login("bob", "bob pw", source="127.0.0.1")
    check(st == 200, f"bob likewise: {st} {d}")
    # Many addresses, two guesses each at bob: the name's bound holds them
    # (429) where an address's own would not yet.
    throttled = None
    for a in range(10, 40):
        for i in range(2):
            st, h, _, _ = w.login("bob", f"x{i}", source=f"127.0.0.{a}")
            if st == 429:
                throttled = (a, i, h.get("retry-after"))
                break
            check(st == 401, f"a guess at bob: {st}")
        if throttled:
            break
    check(throttled and int(throttled[2]) > 0,
          f"guesses at one name from many addresses are bounded: "
          f"{throttled}")
    st, _, d, _ = w.login("bob", "bob pw", source="127.0.0.1")
    check(st == 200, f"bob still logs in where nothing failed: {st} {d}")
    w.stop()


# ---- 10: a flood of anonymous sessions ------------------------------------

def test_session_flood(alice):
    w = Web(users_config(alice), name="flood")
    cookie, s = w.session()
    csrf = s.get("csrf")
    check(csrf, f"a new session has its token: {s}")
    c = http.client.HTTPConnection("127.0.0.1", w.port, timeout=DEADLINE_S)
    for _ in range(1100):
        c.request("GET", "/api/session",
                  headers={"Host": f"127.0.0.1:{w.port}"})
        r = c.getresponse()
        r.read()
        check(r.status == 200, f"a flood's GET: {r.status}")
    c.close()
    st, _, d = w.post("/api/login", {"user": "alice", "password": "alice pw"},
                      cookie, csrf)
    check(st == 200 and d.get("user") == "alice",
          f"the login begun before the flood: {st} {d}")
    w.stop()


# ---- 12: a bulk action's expect -------------------------------------------

def test_bulk_expect():
    w = Web(name="expect")
    cookie, s = w.session()
    csrf = s["csrf"]
    ids = [enqueue("expect_kind", "expectq", "--in", "7d") for _ in range(5)]
    body = {"filter": {"kind": "expect_kind"}, "expect": 1}
    st, _, d = w.post("/api/jobs/delete", body, cookie, csrf)
    left = psql("select count(*) from pgjob.jobs where kind = 'expect_kind'")
    check(st == 409 and d.get("count") == 5 and left == "5",
          f"expect 1 where 5 match: {st} {d}, {left} left")
    for bad in ("garbage", -1, 1.5, None, [1]):
        st, _, d = w.post("/api/jobs/delete",
                          {"filter": {"kind": "expect_kind"}, "expect": bad},
                          cookie, csrf)
        check(st == 400, f"expect {bad!r}: {st} {d}")
    st, _, d = w.post("/api/jobs/delete", {"filter": {"kind": "expect_kind"}},
                      cookie, csrf)
    check(st == 400, f"no expect: {st} {d}")
    left = psql("select count(*) from pgjob.jobs where kind = 'expect_kind'")
    check(left == "5", f"no refused action deleted a job: {left}")
    # Fewer than confirmed (one cancelled meanwhile): it acts on those.
    psql(f"update pgjob.jobs set state = 'running', locked_by = 'x', "
         f"locked_until = now() + interval '1h' where id = {ids[0]}")
    st, _, d = w.post("/api/jobs/cancel", {"filter": {"kind": "expect_kind"},
                                           "expect": 5}, cookie, csrf)
    check(st == 200 and d.get("affected") == 4,
          f"expect 5 where 4 may be cancelled: {st} {d}")
    w.stop()


# ---- 19: cancel a running job ---------------------------------------------

def test_cancel_running():
    w = Web(name="cancel")
    cookie, s = w.session()
    csrf = s["csrf"]
    job = enqueue("cancel_kind", "cancelq")
    psql("update pgjob.jobs set state = 'running', attempts = 1, "
         "locked_by = 'nowhere/1', locked_until = now() + interval '1h' "
         f"where id = {job}")
    st, _, d = w.post("/api/jobs/cancel", {"ids": [job]}, cookie, csrf)
    check(st == 200 and d.get("affected") == 0,
          f"a plain cancel leaves a running job: {st} {d}")
    st, _, d = w.post("/api/jobs/cancel", {"filter": {"kind": "cancel_kind"},
                                           "expect": 1, "stop_running": True},
                      cookie, csrf)
    check(st == 400, f"stop_running is for one job's ids only: {st} {d}")
    st, _, d = w.post("/api/jobs/cancel", {"ids": [job],
                                           "stop_running": True},
                      cookie, csrf)
    state = psql(f"select state || ' ' || coalesce(locked_by, '-') from "
                 f"pgjob.jobs where id = {job}")
    check(st == 200 and d.get("affected") == 1 and state == "cancelled -",
          f"the job page's stop: {st} {d}, {state}")
    w.stop()


# ---- one path for each operator action (docs/cli.md) -----------------------

def job_row(state, key, attempts=3):
    ended = "null" if state == "available" else "now()"
    key = f"'{key}'" if key else "null"
    return int(psql(
        "insert into pgjob.jobs (kind, queue, state, attempts, last_error, "
        f"finished_at, unique_key) values ('retry_kind', 'retryq', "
        f"'{state}', {attempts}, 'e', {ended}, {key}) returning id"))


def pgjob_retry(job):
    return subprocess.run([PGJOB, "--database", DB, "retry", str(job)],
                          capture_output=True, text=True)


def test_retry_rules():
    w = Web(name="retry")
    cookie, s = w.session()
    csrf = s["csrf"]
    # A done job runs again, from the console and from pgjob retry.
    done = [job_row("done", None, 1) for _ in range(2)]
    st, _, d = w.post("/api/jobs/retry", {"ids": [done[0]]}, cookie, csrf)
    check(st == 200 and d.get("affected") == 1, f"retry done: {st} {d}")
    r = pgjob_retry(done[1])
    check(r.returncode == 0 and f"retried job {done[1]} (was done)" in r.stdout,
          f"pgjob retry of a done job: {r.returncode} {r.stdout} {r.stderr}")
    states = psql("select string_agg(state, ',' order by id) from pgjob.jobs "
                  f"where id in ({done[0]}, {done[1]})")
    check(states == "available,available", f"done jobs retried: {states}")
    # The holder of a key (available after a failure) and a newer dead job
    # with it: the holder is retried, the dead job stays (before schema 33
    # the console picked the dead one and answered 409 from the index).
    holder, dead = job_row("available", "rk-1"), job_row("dead", "rk-1")
    st, _, d = w.post("/api/jobs/retry", {"ids": [holder, dead]},
                      cookie, csrf)
    check(st == 200 and d.get("affected") == 1,
          f"retry a key's holder and a dead job with it: {st} {d}")
    r = pgjob_retry(dead)
    check(r.returncode == 1 and f"job {holder} holds its unique_key" in
          r.stderr, f"pgjob retry of the dead one: {r.returncode} {r.stderr}")
    # By a filter: of two dead jobs with one key, the newest.
    pair = [job_row("dead", "rk-2") for _ in range(2)]
    st, _, d = w.post("/api/jobs/retry",
                      {"filter": {"kind": "retry_kind", "state": "dead"},
                       "expect": 3}, cookie, csrf)
    check(st == 200 and d.get("affected") == 1,
          f"retry by a filter: {st} {d}")
    states = psql("select string_agg(id || ':' || state, ',' order by id) "
                  "from pgjob.jobs where unique_key in ('rk-1', 'rk-2')")
    want = (f"{holder}:available,{dead}:dead,{pair[0]}:dead,"
            f"{pair[1]}:available")
    check(states == want, f"one holder per key: {states}, not {want}")
    w.stop()


def main():
    subprocess.run(["psql", CI, "-qAtX", "-c",
                    "drop database if exists t_web_abuse", "-c",
                    "create database t_web_abuse"], check=True,
                   capture_output=True)
    subprocess.run([PGJOB, "--database", DB, "migrate"], check=True,
                   capture_output=True)
    enqueue("abuse", "abuseq", "--in", "7d")
    alice, bob = hash_password("alice pw"), hash_password("bob pw")
    tests = {
        "session_other_port": lambda: test_session_other_port(alice),
        "slowloris": test_slowloris,
        "public_url_without_users": test_public_url_without_users,
        "open_console_start_line": test_open_console_start_line,
        "login_lockout": lambda: test_login_lockout(alice, bob),
        "session_flood": lambda: test_session_flood(alice),
        "bulk_expect": test_bulk_expect,
        "cancel_running": test_cancel_running,
        "retry_rules": test_retry_rules,
    }
    for name in sys.argv[1:] or tests:
        tests[name]()
        print(f"{name}: ok")
    print(f"test_web_abuse: {webtest.checks} checks passed")


if __name__ == "__main__":
    main()
