#!/usr/bin/env bash
# What enqueueing costs (docs/performance.md, "Enqueue"):
#
#   tests/bench/enqueue.sh            full form, about 4 minutes
#   tests/bench/enqueue.sh --short    seconds: what the suite's --short runs
#
# It starts its own PostgreSQL at default durability (scripts/testpg.sh
# with PGJOBD_TESTPG_DURABLE=1: fsync and synchronous_commit on), migrates
# it, and prints one markdown table, with unique keys off and on (a distinct
# key per job, so no job meets a held key):
#
#   - bulk: pgjob.enqueue_many() with arrays of 1,000 and 10,000 jobs
#     (`pgjobd_bench_tool many`: 2 client processes, a payload {"n": i}
#     per job, the array built anew for each call, sent as a parameter and
#     parsed by the server, as an application's would be), in jobs/s; and
#     `pgjob enqueue --file` of a JSON Lines file of LINES jobs (1,000,000;
#     --short 100,000), one transaction, timed end to end.  (Until
#     2026-12-02 the arrays went through pgbench, whose substitution of a
#     key variable per job moves the rest of the script once per job: its
#     own CPU, on the same two cores, was most of what the keyed rows
#     measured.);
#   - single: pgjob.enqueue('bench', '{"n": 1}') against a plain INSERT
#     of the same row (pgbench -M prepared, 2 clients, one call a
#     transaction), SECS seconds each, interleaved ROUNDS times, the calls/s
#     of each summed over the rounds, and enqueue's share of the INSERT's.
#
# The jobs table is emptied before each measure.  Figures are printed,
# never asserted.  Options: --short, --secs N, --rounds N, --lines N.
# PGJOBD_BUILD_DIR picks the build folder.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}

secs=20 rounds=2 lines=1000000 bulk_secs=20
while [ $# -gt 0 ]; do
	case $1 in
	--short) secs=2 rounds=1 lines=100000 bulk_secs=2 ;;
	--secs) secs=$2; bulk_secs=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--lines) lines=$2; shift ;;
	*) echo "usage: enqueue.sh [--short] [--secs N] [--rounds N] [--lines N]" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j2 --target pgjob pgjobd_bench_tool >/dev/null
dir="$build/bench-enqueue"
PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
cleanup() { bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null; }
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql "$db" -X -q -At -v ON_ERROR_STOP=1 "$@"; }
"$build/pgjob" -d "$db" migrate >/dev/null
work="$dir/scripts"
mkdir -p "$work"

empty() { sql -c "truncate pgjob.jobs cascade" -c "vacuum analyze pgjob.jobs" -c "checkpoint"; }

# pgbench's transactions per second from its output.
tps() { sed -n 's/^tps = \([0-9.]*\).*/\1/p'; }

bulk_sql() { # n keys: jobs/s
	empty
	"$build/pgjobd_bench_tool" many "$db" 2 "$1" "$2" "$bulk_secs" |
		sed -n 's/.* rate=\([0-9]*\)$/\1/p'
}

bulk_cli() { # keys: jobs/s
	local f="$work/lines_$1.jsonl" t0 t1
	awk -v n="$lines" -v keys="$1" 'BEGIN {
		for (i = 0; i < n; i++) {
			printf "{\"kind\":\"bench\",\"payload\":{\"n\":%d}", i
			if (keys) printf ",\"unique_key\":\"file:%d\"", i
			print "}"
		}
	}' >"$f"
	empty
	t0=$(date +%s.%N)
	"$build/pgjob" -d "$db" enqueue --file "$f" >/dev/null
	t1=$(date +%s.%N)
	awk -v n="$lines" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}'
}

# Single calls: enqueue and INSERT interleaved; prints "enqueue insert".
single() { # keys
	local fe="$work/single_enqueue_$1.sql" fi="$work/single_insert_$1.sql"
	local e=0 i=0
	if [ "$1" = 1 ]; then
		printf '%s\n' '\set r random(1, 1000000000000000)' \
			"select pgjob.enqueue('bench', '{\"n\": 1}', unique_key => :r::text);" >"$fe"
		printf '%s\n' '\set r random(1, 1000000000000000)' \
			"insert into pgjob.jobs (kind, payload, unique_key) values ('bench', '{\"n\": 1}', :r::text);" >"$fi"
	else
		echo "select pgjob.enqueue('bench', '{\"n\": 1}');" >"$fe"
		echo "insert into pgjob.jobs (kind, payload) values ('bench', '{\"n\": 1}');" >"$fi"
	fi
	empty
	for _ in $(seq "$rounds"); do
		e=$(pgbench -n -M prepared -c 2 -j 2 -T "$secs" -f "$fe" "$db" 2>&1 | tps | awk -v s="$e" '{printf "%.0f", s + $1}')
		i=$(pgbench -n -M prepared -c 2 -j 2 -T "$secs" -f "$fi" "$db" 2>&1 | tps | awk -v s="$i" '{printf "%.0f", s + $1}')
	done
	echo "$((e / rounds)) $((i / rounds))"
}

b1k_off=$(bulk_sql 1000 0)
b1k_on=$(bulk_sql 1000 1)
b10k_off=$(bulk_sql 10000 0)
b10k_on=$(bulk_sql 10000 1)
cli_off=$(bulk_cli 0)
cli_on=$(bulk_cli 1)
read -r se_off si_off <<<"$(single 0)"
read -r se_on si_on <<<"$(single 1)"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo
echo "## Enqueue (tests/bench/enqueue.sh$([ "$secs" = 2 ] && echo " --short"))"
echo
echo "| measure | unique keys off | unique keys on |"
echo "| --- | ---: | ---: |"
echo "| pgjob.enqueue_many(), arrays of 1,000, 2 clients (jobs/s) | $b1k_off | $b1k_on |"
echo "| pgjob.enqueue_many(), arrays of 10,000, 2 clients (jobs/s) | $b10k_off | $b10k_on |"
echo "| pgjob enqueue --file, $lines lines, one transaction (jobs/s) | $cli_off | $cli_on |"
echo "| single pgjob.enqueue(), 2 clients (calls/s) | $se_off | $se_on |"
echo "| plain INSERT of the same row, 2 clients (calls/s) | $si_off | $si_on |"
echo "| pgjob.enqueue() / INSERT | $(ratio "$se_off" "$si_off") | $(ratio "$se_on" "$si_on") |"
