#!/usr/bin/env bash
# The web console in a real browser (docs/console.md, ctest
# browser.console): a real PostgreSQL (the "pg" fixture's server, a
# database of its own), a real pgjobd running jobs, a real `pgjob web`
# with an operator and a read-only user, and Debian's chromium driven
# headless by selenium (test_console.py).
#
#   tests/browser/run.sh [--update-docs]
#
# Environment (ctest sets it): PGJOBD_SOURCE, PGJOBD_TEST_BIN (the build
# folder with pgjob and pgjobd), PGJOBD_TESTPG (the test server's folder,
# with its conninfo).  The screenshots go to a folder this prints;
# --update-docs copies them into docs/console/ as well.
#
# Exit 77 (ctest: skipped) when chromium, chromedriver or python3-selenium
# is missing (scripts/deps.sh installs them).
set -euo pipefail

src=${PGJOBD_SOURCE:?PGJOBD_SOURCE: the source tree}
bin=${PGJOBD_TEST_BIN:?PGJOBD_TEST_BIN: the build folder}
testpg=${PGJOBD_TESTPG:?PGJOBD_TESTPG: the test server folder}
update_docs=0
[ "${1:-}" = --update-docs ] && update_docs=1

# Debian's python3 has python3-selenium; a python3 earlier on PATH (pyenv,
# a virtualenv) may not.
py=/usr/bin/python3
skip() {
	echo "browser: SKIP: $* (scripts/deps.sh installs chromium," \
		"chromium-driver and python3-selenium)"
	exit 77
}
command -v chromium >/dev/null 2>&1 || skip "no chromium"
command -v chromedriver >/dev/null 2>&1 || skip "no chromedriver"
"$py" -c 'import selenium' 2>/dev/null || skip "no python3-selenium"

# shellcheck source=scripts/testlib.sh
. "$src/scripts/testlib.sh"

server=$(cat "$testpg/conninfo")
dbname=t_browser
db="$server dbname=$dbname"
work=$(mktemp -d /tmp/pgjob-browser.XXXXXX)
shots="$work/screenshots"
mkdir -p "$shots"
echo "browser: work folder $work; screenshots in $shots"

pids=()
cleanup() {
	local rc=$?
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	if [ $rc -ne 0 ]; then
		echo "browser: failed (exit $rc); logs:"
		for f in "$work"/*.log; do
			[ -e "$f" ] || continue
			echo "--- $f (last 40 lines)"
			tail -n 40 "$f"
		done
	fi
	exit $rc
}
trap cleanup EXIT

psql -X -q -v ON_ERROR_STOP=1 -d "$server" \
	-c "drop database if exists $dbname with (force)" \
	-c "create database $dbname"
"$bin/pgjob" --database "$db" migrate

# Hashes of the two users' passwords, by the command docs/console.md shows.
op_pass="operator-$RANDOM-$RANDOM"
ro_pass="reader-$RANDOM-$RANDOM"
op_hash=$(printf '%s\n' "$op_pass" | "$bin/pgjob" web --hash-password)
ro_hash=$(printf '%s\n' "$ro_pass" | "$bin/pgjob" web --hash-password)
case $op_hash in
'$y$'*) ;;
*) echo "browser: pgjob web --hash-password printed \"$op_hash\"" >&2; exit 1 ;;
esac

port=$(free_port browser)
marker="$work/marker"
conf="$work/pgjobd.yaml"
cat >"$conf" <<YAML
database:
  conninfo: "$db"
workers: 2
poll_interval: 200ms
log:
  level: info
  format: text
defaults:
  timeout: 30s
  max_attempts: 2
  backoff: { base: 1s, max: 1s }
queues:
  default: { concurrency: 4 }
  mail: { concurrency: 2 }
  slow: { concurrency: 1 }
handlers:
  hello:
    type: exec
    command: ["/bin/echo", '{"greeting": "hello"}']
  mailer:
    type: exec
    command: ["/bin/echo", '{"sent": true}']
    queue: mail
  sleeper:
    type: exec
    command: ["/bin/sleep", "3600"]
    queue: slow
  flaky:
    type: exec
    command: ["$src/tests/browser/flaky.sh", "$marker"]
schedules:
  nightly-report: { cron: "30 2 * * *", kind: hello, timezone: UTC }
  every-minute: { cron: "* * * * *", kind: hello, queue: default }
tasks:
  feed-consumer: { command: ["/bin/sleep", "3600"], partitions: 3 }
web:
  listen: 127.0.0.1:$port
  users:
    - name: alice
      password_hash: "$op_hash"
      role: operator
    - name: bob
      password_hash: "$ro_hash"
      role: read-only
YAML
"$bin/pgjobd" -c "$conf" --check-config

"$bin/pgjobd" -c "$conf" >"$work/pgjobd.log" 2>&1 &
pids+=($!)
"$bin/pgjob" -c "$conf" web >"$work/web.log" 2>&1 &
pids+=($!)

# Both ready: pgjobd says so in its log, the console answers.
for _ in $(seq 1 300); do
	grep -q 'ready:' "$work/pgjobd.log" 2>/dev/null &&
		"$py" -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2)' \
			"http://127.0.0.1:$port/api/session" >/dev/null 2>&1 &&
		break
	for p in "${pids[@]}"; do
		kill -0 "$p" 2>/dev/null || { echo "browser: a process died" >&2; exit 1; }
	done
	sleep 0.1
done

PGJOB_WEB_URL="http://127.0.0.1:$port/" PGJOB_DB="$db" \
	PGJOB_MARKER="$marker" PGJOB_SHOTS="$shots" \
	PGJOB_OP_USER=alice PGJOB_OP_PASS="$op_pass" \
	PGJOB_RO_USER=bob PGJOB_RO_PASS="$ro_pass" \
	PGJOB_PGJOB="$bin/pgjob" \
	"$py" "$src/tests/browser/test_console.py"

if [ $update_docs -eq 1 ]; then
	docs=$(cd "$src/docs" && pwd)/console
	mkdir -p "$docs"
	cp "$shots"/*.png "$docs/"
	echo "browser: screenshots copied into $docs/"
fi
echo "browser: screenshots in $shots"
