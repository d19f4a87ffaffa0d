#!/usr/bin/env python3
"""
int.test_web_http: the web console's HTTP server and access model, at the
HTTP level, against a real `pgjob web` and the test PostgreSQL (the `pg`
fixture: PGJOBD_TESTPG/conninfo).  Python's standard library only.

What it checks (docs/security.md, "The web console"): the security headers
on the page, the assets and the API; an open console on loopback; that an
open console refuses a non-loopback address (exit 78); with users: 401
before a login, wrong password and unknown user alike, the bound on failed
logins (429 with Retry-After, per address and for everyone), the session
cookie's flags and its renewal at login; the CSRF token, Content-Type and
Origin on every POST; a read with the cookie alone refused; a read-only user's forged POST refused with nothing
changed in the database; an operator's action through the API changing it;
the Host check (DNS rebinding); body and URL bounds; bad JSON; logout; that
`pgjob web --hash-password` makes hashes that log in; that the log has
the failed logins, escaped, without a password or a session token; and
(docs/console.md, "Compression and caching") gzip when asked only, ETags
and 304s, and HEAD.

Several loopback source addresses (127.0.0.2, ...) stand for several
clients: Linux routes all of 127/8 to lo.
"""
import gzip
import hashlib
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

DB = CI.replace("dbname=postgres", "dbname=t_web_http")
WORK = tempfile.mkdtemp(prefix="test_web_http.")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; "
       "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'")


class Web:
    """A running `pgjob web` on a free loopback port."""

    def __init__(self, config=None, listen="127.0.0.1:0", name="web"):
        self.log = os.path.join(WORK, name + ".log")
        args = [PGJOB]
        if config is not None:
            path = os.path.join(WORK, name + ".yaml")
            with open(path, "w") as f:
                f.write(config)
            args += ["-c", path]
        args += ["--database", DB, "web", "--listen", listen]
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(args, stderr=err,
                                         stdout=subprocess.DEVNULL)
        started.append(self.proc)
        self.port = None
        # Its start line names the port; or it exits.
        while self.port is None and self.proc.poll() is None:
            m = re.search(r"console at http://127\.0\.0\.1:(\d+)/",
                          open(self.log).read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait()

    def text(self):
        return open(self.log, "rb").read()

    def req(self, method, path, body=None, headers=None, cookie=None,
            source="127.0.0.1", host=None):
        h = dict(headers or {})
        if cookie:
            h["Cookie"] = "pgjob_session=" + cookie
        c = http.client.HTTPConnection("127.0.0.1", self.port,
                                       source_address=(source, 0))
        # No Accept-Encoding unless headers has one (http.client would
        # send "identity" first, which a server reads before a second).
        c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        c.putheader("Host", host or f"127.0.0.1:{self.port}")
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
        return r.status, hdrs, data

    def session(self, cookie=None, source="127.0.0.1"):
        """GET /api/session: (cookie, its answer)."""
        st, h, data = self.req("GET", "/api/session", cookie=cookie,
                               source=source)
        check(st == 200, f"GET /api/session: {st}")
        m = re.match(r"pgjob_session=([0-9a-f]{64});", h.get("set-cookie", ""))
        return (m.group(1) if m else cookie), json.loads(data)

    def post(self, path, body, cookie, csrf, source="127.0.0.1",
             extra=None):
        h = {"Content-Type": "application/json", "X-CSRF-Token": csrf}
        h.update(extra or {})
        return self.req("POST", path, body, h, cookie, source)

    def login(self, user, password, source="127.0.0.1"):
        cookie, s = self.session(source=source)
        st, h, data = self.post("/api/login",
                                {"user": user, "password": password},
                                cookie, s["csrf"], source)
        return st, h, data, cookie


def hash_password(pw):
    r = subprocess.run([PGJOB, "web", "--hash-password"], input=pw + "\n",
                       capture_output=True, text=True)
    check(r.returncode == 0, f"--hash-password: {r.stderr}")
    return r.stdout.strip()


def security_headers(h, what, api):
    check(h.get("content-security-policy") == CSP, f"{what}: CSP {h}")
    check(h.get("x-content-type-options") == "nosniff", f"{what}: nosniff")
    check(h.get("referrer-policy") == "no-referrer", f"{what}: referrer")
    if api:
        check(h.get("cache-control") == "no-store", f"{what}: no-store")


def paused(queue):
    return psql(DB, "select coalesce((select paused from pgjob.limits "
                    f"where queue = '{queue}'), false)") == "t"


def test_open_console():
    w = Web()
    check(w.port, "the open console starts: " + w.text().decode())
    for path, ctype in (("/", "text/html"), ("/app.js", "text/javascript"),
                        ("/app.css", "text/css")):
        st, h, data = w.req("GET", path)
        check(st == 200 and h["content-type"].startswith(ctype),
              f"GET {path}: {st} {h.get('content-type')}")
        security_headers(h, "GET " + path, False)
    st, h, _ = w.req("GET", "/nothing-here")
    check(st == 404, f"an unknown page: {st}")
    security_headers(h, "a 404", False)

    st, h, data = w.req("GET", "/api/session")
    security_headers(h, "GET /api/session", True)
    s = json.loads(data)
    check(st == 200 and s["user"] is None and s["role"] == "operator" and
          s["login_required"] is False and s["database"] == "t_web_http" and
          re.fullmatch("[0-9a-f]{64}", s["csrf"]), f"open session: {s}")
    cookie = h["set-cookie"]
    check(re.fullmatch(r"pgjob_session=[0-9a-f]{64}; HttpOnly; "
                       r"SameSite=Strict; Path=/", cookie),
          f"the cookie: {cookie}")
    cookie, s = w.session()
    csrf = s["csrf"]

    # DNS rebinding: another name for 127.0.0.1 gets nothing.
    for host in ("evil.example", f"evil.example:{w.port}",
                 f"127.0.0.1:{w.port + 1}"):
        st, h, _ = w.req("GET", "/api/session", host=host)
        check(st in (421, 403), f"Host {host}: {st}")
        security_headers(h, "a bad Host", True)
    for host in (f"localhost:{w.port}", f"[::1]:{w.port}"):
        st, _, _ = w.req("GET", "/", host=host)
        check(st == 200, f"Host {host}: {st}")

    # Every POST: the session's CSRF token, application/json, its Origin.
    body = {"queue": "webq"}
    st, h, _ = w.req("POST", "/api/queues/pause", body,
                     {"Content-Type": "application/json"}, cookie)
    check(st == 403, f"a POST without X-CSRF-Token: {st}")
    security_headers(h, "a 403", True)
    st, _, _ = w.post("/api/queues/pause", body, cookie, "0" * 64)
    check(st == 403, f"a POST with a wrong X-CSRF-Token: {st}")
    st, _, _ = w.post("/api/queues/pause", body, None, csrf)
    check(st == 403, f"a POST without the session cookie: {st}")
    st, _, _ = w.post("/api/queues/pause", body, cookie, csrf,
                      extra={"Content-Type": "text/plain"})
    check(st == 403, f"a POST as text/plain: {st}")
    st, _, _ = w.post("/api/queues/pause", body, cookie, csrf,
                      extra={"Origin": "http://evil.example"})
    check(st == 403, f"a POST from another Origin: {st}")
    check(not paused("webq"), "no refused POST paused the queue")

    # Bounds and bad input.
    st, h, _ = w.post("/api/queues/pause", b"x" * (100 * 1024), cookie, csrf)
    check(st == 413, f"a 100 KiB body: {st}")
    st, h, data = w.post("/api/queues/pause", b'{"queue": "webq"', cookie,
                         csrf)
    check(st == 400 and "error" in json.loads(data), f"bad JSON: {st}")
    st, _, _ = w.req("GET", "/api/jobs?q=" + "a" * (9 * 1024))
    check(st == 414, f"a 9 KiB URL: {st}")

    # The operator of an open console acts.
    st, _, data = w.post("/api/queues/pause", body, cookie, csrf,
                         extra={"Origin": f"http://127.0.0.1:{w.port}"})
    check(st == 200 and paused("webq"),
          f"the open console's pause: {st} {data[:200]}")
    st, _, data = w.post("/api/queues/resume", body, cookie, csrf)
    check(st == 200 and not paused("webq"), f"resume: {st}")

    # Connections of its own, named; killed, they come back, and no read
    # fails for it (a read is asked again on a new connection).
    for _ in range(8):
        st, _, _ = w.req("GET", "/api/overview")
        check(st == 200, f"GET /api/overview: {st}")
    # Only this database's: int.test_web_api's connections share the name
    # and the server, and run beside this test (they once lost one here).
    n = psql(DB, "select count(pg_terminate_backend(pid)) from "
                 "pg_stat_activity where application_name = 'pgjob web' "
                 "and datname = current_database()")
    check(int(n) >= 1, f"the console's connections: {n}")
    for _ in range(8):
        st, _, data = w.req("GET", "/api/overview")
        check(st == 200, f"GET /api/overview after its connections were "
                         f"killed: {st} {data[:200]}")

    compression_and_caching(w)
    check(w.stop() == 0, "SIGTERM stops it with status 0")


def compression_and_caching(w):
    """docs/console.md, "Compression and caching": gzip when the request
    takes it, the same bytes once decoded; an asset's ETag the hash of its
    bytes, 304 when the browser's copy is current; HEAD."""
    gz = {"Accept-Encoding": "gzip, deflate"}
    tags = set()
    for path in ("/", "/app.js", "/app.css"):
        st, h, plain = w.req("GET", path)
        check(st == 200 and "content-encoding" not in h,
              f"GET {path} without Accept-Encoding: as it is: {st} {h}")
        check(h.get("vary") == "Accept-Encoding" and
              h.get("cache-control") == "no-cache",
              f"GET {path}: Vary and no-cache: {h}")
        # The tag is the bytes' hash: a build that changes them changes it.
        tag = h.get("etag", "")
        check(tag == '"' + hashlib.sha256(plain).hexdigest()[:32] + '"',
              f"GET {path}: its ETag is its hash: {tag}")
        tags.add(tag)
        st, hz, body = w.req("GET", path, headers=gz)
        check(st == 200 and hz.get("content-encoding") == "gzip" and
              len(body) < len(plain) and gzip.decompress(body) == plain,
              f"GET {path} with gzip: {st} {hz} {len(body)}/{len(plain)}")
        check(hz.get("etag") == tag[:-1] + '-gzip"',
              f"GET {path}: the gzip'd bytes' tag: {hz.get('etag')}")
        for inm, hh in ((tag, {}), (hz["etag"], gz), ("W/" + tag, gz),
                        ('"other", ' + tag, {})):
            st, h3, body = w.req("GET", path,
                                 headers=dict(hh, **{"If-None-Match": inm}))
            check(st == 304 and body == b"" and h3.get("etag") and
                  "content-encoding" not in h3,
                  f"GET {path} If-None-Match {inm}: {st} {h3}")
        st, _, body = w.req("GET", path, headers={"If-None-Match": '"x"'})
        check(st == 200 and body == plain, f"GET {path}, another tag: {st}")
        for enc in ("gzip;q=0", "identity", "br"):
            st, h3, body = w.req("GET", path,
                                 headers={"Accept-Encoding": enc})
            check(st == 200 and "content-encoding" not in h3 and
                  body == plain, f"GET {path} taking {enc}: {h3}")
        st, h3, body = w.req("HEAD", path, headers=gz)
        check(st == 200 and body == b"" and
              h3.get("content-encoding") == "gzip" and
              h3.get("etag") == hz["etag"] and
              h3.get("content-length") == hz.get("content-length"),
              f"HEAD {path}: {st} {h3}")
    check(len(tags) == 3, f"each asset its own ETag: {tags}")

    # An API answer past a kilobyte: gzip'd only when taken.
    psql(DB, "select pgjob.enqueue('web_gzip', jsonb_build_object('n', i),"
             " 'gzq', now() + interval '7 days') "
             "from generate_series(1, 40) i")
    st, h, plain = w.req("GET", "/api/jobs?queue=gzq")
    check(st == 200 and "content-encoding" not in h and len(plain) > 1024 and
          len(json.loads(plain)["jobs"]) == 40,
          f"/api/jobs as it is: {st} {h} {len(plain)}")
    st, hz, body = w.req("GET", "/api/jobs?queue=gzq", headers=gz)
    check(st == 200 and hz.get("content-encoding") == "gzip" and
          hz.get("vary") == "Accept-Encoding" and
          hz.get("cache-control") == "no-store" and
          gzip.decompress(body) == plain,
          f"/api/jobs gzip'd: {st} {hz}")
    st, h3, body = w.req("HEAD", "/api/jobs?queue=gzq", headers=gz)
    check(st == 200 and body == b"" and h3.get("content-encoding") == "gzip",
          f"HEAD /api/jobs: {st} {h3}")
    # A session's answer holds its CSRF token: never compressed.
    st, h, _ = w.req("GET", "/api/session?new=1", headers=gz)
    check(st == 200 and "content-encoding" not in h,
          f"a new session's answer as it is: {h}")


def test_refuses_open_off_loopback():
    w = Web(listen="0.0.0.0:0", name="open_any")
    rc = w.proc.wait()
    err = w.text().decode()
    check(rc == 78, f"an open console on 0.0.0.0: exit {rc}")
    check("not a loopback address" in err and "--hash-password" in err,
          f"its message: {err}")


def test_hash_password():
    a, b = hash_password("pw one"), hash_password("pw one")
    check(a.startswith("$y$") and a != b, f"two salted yescrypt hashes: {a}")
    r = subprocess.run([PGJOB, "web", "--hash-password"], input="",
                       capture_output=True, text=True)
    check(r.returncode == 2 and "no password" in r.stderr,
          f"an empty stdin: {r.returncode} {r.stderr}")
    return a


def test_users(alice_hash):
    bob_hash = hash_password("bob's secret")
    config = f"""
web:
  session_ttl: 1h
  users:
    - name: alice
      password_hash: "{alice_hash}"
      role: operator
    - name: bob
      password_hash: '{bob_hash}'
      role: read-only
"""
    w = Web(config, name="users")
    check(w.port, "the console with users starts: " + w.text().decode())

    cookie, s = w.session()
    check(s["login_required"] is True and s["user"] is None and
          s["role"] is None, f"before a login: {s}")
    for path in ("/api/overview", "/api/jobs"):
        st, h, _ = w.req("GET", path, cookie=cookie)
        check(st == 401, f"GET {path} before a login: {st}")
        security_headers(h, "a 401", True)

    st, _, _, _ = w.login("alice", "wrong")
    check(st == 401, f"a wrong password: {st}")
    st, _, _, _ = w.login("mallory", "pw one")
    check(st == 401, f"an unknown user: {st}")
    st, h, data, pre = w.login("alice", "pw one")
    s = json.loads(data)
    check(st == 200 and s["user"] == "alice" and s["role"] == "operator",
          f"alice's login: {st} {s}")
    m = re.fullmatch(r"pgjob_session=([0-9a-f]{64}); HttpOnly; "
                     r"SameSite=Strict; Path=/", h.get("set-cookie", ""))
    check(m and m.group(1) != pre, f"a new session cookie: {h}")
    alice, alice_csrf = m.group(1), s["csrf"]
    st, _, _ = w.req("GET", "/api/overview", cookie=pre)
    check(st == 401, f"the session before the login reads nothing: {st}")
    st, _, _ = w.req("GET", "/api/overview", cookie=alice)
    check(st == 401, f"alice's cookie without her token reads nothing: {st}")
    st, _, _ = w.req("GET", "/api/overview", cookie=alice,
                     headers={"X-CSRF-Token": alice_csrf})
    check(st != 401 and st != 403, f"alice reads: {st}")

    # bob is read-only: a forged POST, with his own session's valid CSRF
    # token, changes nothing.
    st, h, data, _ = w.login("bob", "bob's secret")
    s = json.loads(data)
    check(st == 200 and s["role"] == "read-only", f"bob's login: {s}")
    bob = re.match(r"pgjob_session=([0-9a-f]{64});", h["set-cookie"]).group(1)
    for path, body in (("/api/queues/pause", {"queue": "webq"}),
                       ("/api/jobs/cancel", {"ids": [1]}),
                       ("/api/schedules/run", {"name": "x"})):
        st, _, _ = w.post(path, body, bob, s["csrf"])
        check(st == 403, f"bob's POST {path}: {st}")
    check(not paused("webq"), "bob's forged pause changed nothing")
    st, _, _ = w.req("GET", "/api/overview", cookie=bob,
                     headers={"X-CSRF-Token": s["csrf"]})
    check(st not in (401, 403), f"bob reads: {st}")

    # alice acts.
    st, _, data = w.post("/api/queues/pause", {"queue": "webq"}, alice,
                         alice_csrf)
    check(st == 200 and paused("webq"), f"alice's pause: {st} {data[:200]}")
    st, _, _ = w.post("/api/queues/resume", {"queue": "webq"}, alice,
                      alice_csrf)
    check(st == 200 and not paused("webq"), f"alice's resume: {st}")

    # alice retries a dead job: it is available again.
    job = subprocess.run([PGJOB, "--database", DB, "enqueue", "web_test",
                          "{}", "--queue", "webq"], check=True,
                         capture_output=True, text=True).stdout.strip()
    psql(DB, "update pgjob.jobs set state = 'dead', attempts = 1, "
             "last_error = 'boom', finished_at = now() "
             f"where id = {int(job)}")
    st, _, data = w.post("/api/jobs/retry", {"ids": [int(job)]}, bob,
                         s["csrf"])
    check(st == 403, f"bob's retry: {st}")
    st, _, data = w.post("/api/jobs/retry", {"ids": [int(job)]}, alice,
                         alice_csrf)
    state = psql(DB, f"select state from pgjob.all_jobs where id = {int(job)}")
    check(st == 200 and json.loads(data).get("affected") == 1 and
          state == "available", f"alice's retry: {st} {data[:200]} {state}")

    # Logout ends the session, on the server.
    st, h, _ = w.post("/api/logout", {}, alice, alice_csrf)
    check(st == 200 and "Max-Age=0" in h.get("set-cookie", ""),
          f"logout: {st} {h}")
    st, _, _ = w.req("GET", "/api/overview", cookie=alice,
                     headers={"X-CSRF-Token": alice_csrf})
    check(st == 401, f"after logout: {st}")

    # A client that fails: 5 failures, then 429 with Retry-After, even for
    # the right password.  Another address is not held up by it.
    for i in range(5):
        st, _, _, _ = w.login("alice", f"guess {i}", source="127.0.0.2")
        check(st == 401, f"failure {i + 1}: {st}")
    st, h, _, _ = w.login("alice", "guess 6", source="127.0.0.2")
    check(st == 429 and int(h.get("retry-after", "0")) > 0,
          f"the 6th failed login: {st} {h}")
    st, h, _, _ = w.login("alice", "pw one", source="127.0.0.2")
    check(st == 429, f"a blocked address, right password: {st}")
    st, _, _, _ = w.login("alice", "pw one", source="127.0.0.1")
    check(st == 200, f"another address logs in: {st}")

    # Hostile names reach the log escaped.
    st, _, _, _ = w.login("\x1b[2J<b>evil\r\n", "x", source="127.0.0.3")
    check(st == 401, f"a hostile user name: {st}")

    # Everyone together: at most 20 failures a minute, for addresses that
    # failed (and bob's name 10; test_web_abuse.py checks that).  8
    # failures so far (2, 5 from 127.0.0.2, 1 hostile name); new
    # addresses, at unknown names, 4 each (never their own bound), until
    # the global bound answers 429.
    failures, throttled = 8, False
    for a in range(4, 20):
        for i in range(4):
            st, h, _, _ = w.login(f"nobody{a}", "nope",
                                  source=f"127.0.0.{a}")
            if st == 429:
                throttled = i > 0
                break
            check(st == 401, f"a failed login: {st}")
            failures += 1
        if throttled:
            break
    check(throttled and failures >= 20 and int(h["retry-after"]) > 0,
          f"the global bound after {failures} failures")
    st, _, _, _ = w.login("alice", "pw one", source="127.0.0.50")
    check(st == 200, f"an address that never failed still logs in: {st}")

    check(w.stop() == 0, "SIGTERM stops it")
    log = w.text()
    check(b'login of user \\"alice\\" from 127.0.0.2 failed' in log,
          "the log names a failed login")
    check(b"\x1b" not in log and b"\\\\x1b[2J<b>evil" in log,
          f"the hostile name is escaped in the log")
    check(b"POST /api/queues/pause by alice: 200" in log and
          b"POST /api/queues/pause by bob: 403" in log,
          "every action in the log, by whom, with its outcome")
    for secret in (b"pw one", b"guess", b"bob's secret", alice.encode(),
                   bob.encode(), alice_csrf.encode()):
        check(secret not in log, f"the log holds no secret ({secret!r})")


def test_public_url(alice_hash):
    """Behind a reverse proxy: web.public_url's Host and Origin are taken,
    others still are not, and the cookie is Secure for an https URL."""
    config = f"""
web:
  public_url: https://jobs.example.com/
  users:
    - name: alice
      password_hash: "{alice_hash}"
      role: operator
"""
    w = Web(config, name="public")
    check(w.port, "the console with public_url starts: " + w.text().decode())
    st, h, data = w.req("GET", "/api/session", host="jobs.example.com")
    check(st == 200, f"the proxy's Host: {st}")
    check("; Secure" in h.get("set-cookie", ""),
          f"an https public_url makes the cookie Secure: {h}")
    cookie = re.match(r"pgjob_session=([0-9a-f]{64});",
                      h["set-cookie"]).group(1)
    csrf = json.loads(data)["csrf"]
    st, _, _ = w.req("GET", "/api/session", host="evil.example")
    check(st == 421, f"another Host still gets 421: {st}")
    st, _, _ = w.post("/api/login", {"user": "alice", "password": "guess"},
                      cookie, csrf,
                      extra={"Origin": "https://evil.example"})
    check(st == 403, f"a foreign Origin: {st}")
    st, _, _ = w.post("/api/login", {"user": "alice", "password": "guess"},
                      cookie, csrf,
                      extra={"Origin": "https://jobs.example.com"})
    check(st == 401, f"the public Origin passes the checks: {st}")
    check(w.stop() == 0, "stops on SIGTERM")


def main():
    psql(CI, "drop database if exists t_web_http",
         "create database t_web_http")
    subprocess.run([PGJOB, "--database", DB, "migrate"], check=True,
                   capture_output=True)
    # A job makes the queue webq known (a pause names a known queue); it
    # runs at no time soon, and no worker runs here.
    subprocess.run([PGJOB, "--database", DB, "enqueue", "web_test", "{}",
                    "--queue", "webq", "--in", "7d"], check=True,
                   capture_output=True)
    test_open_console()
    test_refuses_open_off_loopback()
    alice_hash = test_hash_password()
    test_users(alice_hash)
    test_public_url(alice_hash)
    print(f"test_web_http: {webtest.checks} checks passed")


if __name__ == "__main__":
    main()
