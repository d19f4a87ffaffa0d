"""
What the Python integration tests of the web console share (test_web_http,
test_web_abuse, test_roles): where the binaries and the test server are,
the processes to stop at exit, a counted check that ends the test at its
first failure, and psql.  Python's standard library only.
"""
import atexit
import os
import signal
import subprocess
import sys

BIN = os.environ["PGJOBD_TEST_BIN"]
PGJOB = os.path.join(BIN, "pgjob")
PGJOBD = os.path.join(BIN, "pgjobd")
# The "pg" fixture's server (scripts/testpg.sh), its postgres database.
CI = open(os.path.join(os.environ["PGJOBD_TESTPG"], "conninfo")).read().strip()

checks = 0
started = []  # every process a test starts, stopped at exit whatever happens


@atexit.register
def stop_all():
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


def psql(conninfo, *sql):
    args = ["psql", conninfo, "-qAtX", "-v", "ON_ERROR_STOP=1"]
    for s in sql:
        args += ["-c", s]
    r = subprocess.run(args, capture_output=True, text=True)
    check(r.returncode == 0, f"psql {sql}: {r.stderr}")
    return r.stdout.strip()
