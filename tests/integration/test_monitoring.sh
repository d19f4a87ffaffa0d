#!/usr/bin/env bash
# The monitoring files of contrib/monitoring/ against the real tools, and
# /metrics and the journald log format of a real pgjobd.
#
#   test_monitoring.sh rules   promtool check rules; promtool test rules
#                              with tests/fixtures/monitoring/pgjobd-alerts.
#                              test.yml (each alert fires, and does not);
#                              the dashboard is JSON with a PromQL
#                              expression in every target.
#   test_monitoring.sh live    a real pgjobd on the test PostgreSQL (the
#                              "pg" fixture) runs real jobs; its log under
#                              JOURNAL_STREAM carries journald priorities;
#                              promtool check metrics passes on a scrape,
#                              which holds every new series with plausible
#                              values; then a real Prometheus scrapes it and
#                              every expression of the dashboard and of the
#                              rules parses, the dashboard's return data, and
#                              every metric a rule names has data.
#
# Environment (tests/CMakeLists.txt): PGJOBD_SOURCE, PGJOBD_TEST_BIN,
# PGJOBD_TESTPG (live).  Debian packages: prometheus (promtool and the
# server), jq.
set -euo pipefail

src=${PGJOBD_SOURCE:?}
rules=$src/contrib/monitoring/pgjobd-alerts.yml
dash=$src/contrib/monitoring/grafana-dashboard.json

# Metrics the files use that no pgjobd of this tree exposes yet, each with
# its reason (none now).
expected_missing=()

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# The PromQL of every target of the dashboard, one a line.
dashboard_exprs() {
	jq -r '.. | objects | select(has("targets")) | .targets[].expr' "$dash"
}

# The expr of every rule, one a line (each is written on one line).
rule_exprs() {
	sed -n 's/^ *expr: *//p' "$rules"
}

run_rules() {
	command -v promtool >/dev/null || fail "promtool is missing (Debian: prometheus)"
	promtool check rules "$rules"
	promtool test rules "$src/tests/fixtures/monitoring/pgjobd-alerts.test.yml"
	jq -e '.panels | length > 0' "$dash" >/dev/null || fail "$dash: no panels"
	local n
	n=$(jq '[.. | objects | select(has("targets")) | .targets[]
		| select((.expr // "") == "")] | length' "$dash")
	[ "$n" -eq 0 ] || fail "$dash: $n targets without an expression"
	[ "$(rule_exprs | wc -l)" -eq "$(grep -c '^ *- alert:' "$rules")" ] ||
		fail "$rules: an alert whose expr is not on one line"
	echo "ok: rules checked and unit-tested, dashboard has $(dashboard_exprs | wc -l) expressions"
}

# ---- live ----------------------------------------------------------------

work=
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	[ -n "$work" ] && rm -rf "$work"
}

# A TCP port of 127.0.0.1 that nothing listens on now, below the kernel's
# ephemeral range (32768 and up), where outgoing connections take theirs.
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 12000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
	fail "no free port"
}

# GET path from 127.0.0.1:port; prints the body.
http_get() {
	local port=$1 path=$2
	{
		exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	} 2>/dev/null
	printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$path" >&3
	sed '1,/^\r$/d' <&3
	exec 3<&-
}

# Waits up to 60 s for the scrape to hold a line matching the regex.
wait_metric() {
	for _ in $(seq 600); do
		http_get "$mport" /metrics | grep -Eq "$1" && return 0
		sleep 0.1
	done
	fail "no line matching '$1' in /metrics:
$(http_get "$mport" /metrics)"
}

# Asserts that the scrape in $work/scrape holds a line matching the regex.
has() {
	grep -Eq "$1" "$work/scrape" || fail "no line matching '$1' in the scrape:
$(cat "$work/scrape")"
}

# The value of the series whose line starts with $1 in the scrape.
value() {
	awk -v k="$1 " 'index($0, k) == 1 { print $NF; exit }' "$work/scrape"
}

# promtool query instant as JSON; fails when the server refuses expr.
query() {
	promtool query instant -o json "http://127.0.0.1:$pport" "$1" ||
		fail "Prometheus refused: $1"
}

# Whether a metric is listed as expected missing.
excepted() {
	local m
	for m in "${expected_missing[@]}"; do
		[ "$1" = "$m" ] && return 0
	done
	return 1
}

# The metric names an expression refers to: pgjobd's, process_*, and up.
names_in() {
	grep -oE '\b(pgjobd_[a-z0-9_]+|process_[a-z_]+)\b|\bup\{' <<<"$1" |
		sed 's/{$//' | sort -u
}

start_pgjobd() {
	local ci db
	ci=$(cat "$PGJOBD_TESTPG/conninfo")
	psql "$ci" -qX -c 'drop database if exists t_monitoring' \
		-c 'create database t_monitoring' >/dev/null 2>&1
	db=${ci/dbname=postgres/dbname=t_monitoring}
	"$bin/pgjob" --database "$db" migrate >/dev/null
	mport=$(free_port)
	cat >"$work/pgjobd.yaml" <<EOF
database: { conninfo: "$db" }
workers: 2
metrics: { listen: "127.0.0.1:$mport" }
handlers:
  noop: { type: plugin, library: "$bin/pgjobd_example.so", symbol: pgjobd_example }
  fail: { type: exec, command: [/bin/false], max_attempts: 1 }
  slow: { type: exec, command: [/bin/sleep, "30"], timeout: 1s, max_attempts: 1 }
  sleepy: { type: sql, statement: "select pg_sleep(30)", timeout: 1s, max_attempts: 1 }
  nightly: { type: exec, command: [/bin/true], timeout: 2h }
schedules:
  every_minute: { cron: "* * * * *", kind: noop }
EOF
	# As systemd starts a unit: stderr is the journal's stream, and
	# JOURNAL_STREAM names its device and inode.
	: >"$work/pgjobd.log"
	JOURNAL_STREAM=$(stat -c '%d:%i' "$work/pgjobd.log") \
		"$bin/pgjobd" -c "$work/pgjobd.yaml" >>"$work/pgjobd.log" 2>&1 &
	pids+=($!)
	daemon=$!
	wait_metric '^pgjobd_slots_held 2$'
	psql "$db" -qX -v ON_ERROR_STOP=1 <<'EOF'
insert into pgjob.jobs (kind) select 'noop' from generate_series(1, 20);
insert into pgjob.jobs (kind) values ('fail'), ('slow'), ('sleepy'),
  ('no_such_kind');
insert into pgjob.jobs (kind, run_at) values ('noop', now() + interval '1 day');
EOF
}

check_journal() {
	local log=$work/pgjobd.log
	grep -q '^<6>level=info proc=supervisor pid=[0-9]* ' "$log" ||
		fail "no <6> info line: $(cat "$log")"
	grep -q '^<4>level=warn proc=worker pid=[0-9]* worker=[0-9] slot=[0-9] job=[0-9]* kind=slow .*timed out' "$log" ||
		fail "no <4> warning line: $(cat "$log")"
	! grep -v '^<[2-7]>level=' "$log" | grep -q . ||
		fail "lines without a priority: $(grep -v '^<' "$log")"
	! grep -q ' ts=' "$log" || fail "ts= under journald"
}

check_scrape() {
	local now start
	wait_metric '^pgjobd_jobs_timed_out_total\{kind="slow",queue="default"\} 1$'
	wait_metric '^pgjobd_jobs_timed_out_total\{kind="sleepy",queue="default"\} 1$'
	wait_metric '^pgjobd_queue_dead\{queue="default"\} 3$'
	wait_metric '^pgjobd_queue_unhandled\{queue="default"\} 1$'
	wait_metric '^pgjobd_schedule_next_tick_timestamp_seconds\{schedule="every_minute"\} '
	kill -HUP "$daemon"
	wait_metric '^pgjobd_config_reloads_total\{result="success"\} 1$'
	# The new workers (the reload rolled them over) connected again: both
	# in the one scrape that the checks below read.  Waited for one at a
	# time, the old workers could meet the first and be gone, the new ones
	# not yet connected, at the scrape (seen once under the sanitizers:
	# slots_held 0 and no pgjobd_db_up).
	local _
	for _ in $(seq 600); do
		http_get "$mport" /metrics >"$work/scrape"
		grep -Eq '^pgjobd_slots_held 2$' "$work/scrape" &&
			grep -Eq '^pgjobd_db_up 1$' "$work/scrape" && break
		sleep 0.1
	done
	promtool check metrics <"$work/scrape" >"$work/lint" 2>&1 ||
		fail "promtool check metrics: $(cat "$work/lint")"
	[ ! -s "$work/lint" ] || fail "promtool check metrics: $(cat "$work/lint")"
	has '^pgjobd_build_info\{version="[0-9.]+",schema="[0-9]+"\} 1$'
	has '^pgjobd_jobs_timed_out_total\{kind="fail",queue="default"\} 0$'
	has '^pgjobd_jobs_dead_total\{kind="slow",queue="default"\} 1$'
	has '^pgjobd_queue_scheduled\{queue="default"\} 1$'
	has '^pgjobd_db_up 1$'
	has '^pgjobd_db_connect_failures_total 0$'
	has '^pgjobd_config_reloads_total\{result="failure"\} 0$'
	has '^pgjobd_config_last_reload_successful 1$'
	# Durations up to the 2h timeout, in a fixed number of buckets.
	has '^pgjobd_handler_duration_seconds_bucket\{kind="slow",queue="default",le="7200"\} 1$'
	[ "$(grep -c '^pgjobd_handler_duration_seconds_bucket{kind="slow"' "$work/scrape")" -eq 17 ] ||
		fail "not 16 finite buckets and +Inf"
	# 20 + fail + slow + sleepy claimed; each waited under a minute.
	[ "$(value 'pgjobd_job_queue_wait_seconds_count{queue="default"}')" -ge 23 ] ||
		fail "time in queue: too few observations"
	has '^pgjobd_job_queue_wait_seconds_bucket\{queue="default",le="60"\} (2[3-9]|[3-9][0-9])$'
	now=$(date +%s)
	start=$(value process_start_time_seconds)
	awk -v s="$start" -v n="$now" 'BEGIN { exit !(s > n - 600 && s <= n + 1) }' ||
		fail "process_start_time_seconds $start, now $now"
	local last next
	last=$(value 'pgjobd_schedule_last_tick_timestamp_seconds{schedule="every_minute"}')
	next=$(value 'pgjobd_schedule_next_tick_timestamp_seconds{schedule="every_minute"}')
	# A new schedule counts from now; its next tick is the next minute.
	[ "$next" -gt "$last" ] && [ "$next" -le $((last + 60)) ] &&
		[ $((next % 60)) -eq 0 ] || fail "next tick $next, last $last"
	awk -v v="$(value process_open_fds)" 'BEGIN { exit !(v > 3) }' || fail process_open_fds
	awk -v v="$(value process_max_fds)" 'BEGIN { exit !(v >= 64) }' || fail process_max_fds
	awk -v v="$(value pgjobd_workers_resident_memory_bytes)" \
		'BEGIN { exit !(v > 1000000) }' || fail pgjobd_workers_resident_memory_bytes
	has '^pgjobd_workers_cpu_seconds_total [0-9.e+-]+$'
	has '^process_cpu_seconds_total [0-9.e+-]+$'
}

start_prometheus() {
	local try
	# The port can be taken between free_port and the bind (the other
	# tests run servers too): then another port.
	for try in 1 2 3 4 5; do
		launch_prometheus && return 0
		grep -q 'address already in use' "$work/prometheus.log" ||
			break
	done
	fail "Prometheus did not scrape pgjobd: $(tail -20 "$work/prometheus.log")"
}

# Starts Prometheus on a free port and waits for its scrapes; returns 1 if
# it exits or does not scrape in time.
launch_prometheus() {
	pport=$(free_port)
	rm -rf "$work/tsdb"
	mkdir -p "$work/tsdb"
	cat >"$work/prometheus.yml" <<EOF
global: { scrape_interval: 1s, evaluation_interval: 1s }
rule_files: ["$rules"]
scrape_configs:
  - job_name: pgjobd
    static_configs: [ { targets: ["127.0.0.1:$mport"] } ]
EOF
	promtool check config "$work/prometheus.yml" >/dev/null
	prometheus --config.file="$work/prometheus.yml" \
		--storage.tsdb.path="$work/tsdb" \
		--web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
	local pid=$!
	pids+=("$pid")
	# Ten scrapes at least: every rate() window has points.
	for _ in $(seq 600); do
		kill -0 "$pid" 2>/dev/null || return 1
		local n
		n=$(promtool query instant -o json "http://127.0.0.1:$pport" \
			'count_over_time(pgjobd_build_info[1m])' 2>/dev/null |
			jq -r '.[0].value[1] // 0' 2>/dev/null || echo 0)
		[ "${n:-0}" -ge 10 ] && return 0
		sleep 0.2
	done
	return 1
}

check_expressions() {
	local e q n m checked=0
	while IFS= read -r e; do
		# Grafana's variables, as the dashboard's defaults resolve them.
		q=${e//\$__rate_interval/1m}
		q=${q//\$instance/.*}
		n=$(query "$q" | jq 'length')
		if [ "$n" -eq 0 ]; then
			for m in $(names_in "$e"); do
				excepted "$m" && continue 2
			done
			fail "dashboard expression returns no data: $e"
		fi
		checked=$((checked + 1))
	done < <(dashboard_exprs)
	while IFS= read -r e; do
		query "$e" >/dev/null # it parses, and the server runs it
		for m in $(names_in "$e"); do
			excepted "$m" && continue
			[ "$(query "count($m)" | jq 'length')" -eq 1 ] ||
				fail "rule metric $m has no data (in: $e)"
		done
		checked=$((checked + 1))
	done < <(rule_exprs)
	# The exception is still needed: else drop it from the list.
	for m in "${expected_missing[@]}"; do
		[ "$(query "count($m)" | jq 'length')" -eq 0 ] ||
			echo "note: $m is exposed now; drop it from expected_missing"
	done
	echo "ok: $checked expressions evaluated against Prometheus"
}

run_live() {
	bin=${PGJOBD_TEST_BIN:?}
	: "${PGJOBD_TESTPG:?}"
	command -v prometheus >/dev/null || fail "prometheus is missing (Debian: prometheus)"
	work=$(mktemp -d /tmp/pgjobd-monitoring.XXXXXX)
	chmod 755 "$work"
	trap cleanup EXIT
	start_pgjobd
	check_scrape
	check_journal
	start_prometheus
	check_expressions
}

case ${1:-} in
rules) run_rules ;;
live) run_live ;;
*) fail "usage: test_monitoring.sh rules|live" ;;
esac
