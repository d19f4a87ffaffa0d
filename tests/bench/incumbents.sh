#!/usr/bin/env bash
# pgjobd against the Redis-backed incumbents in their own languages (issue
# 47; docs/comparison.md, "The incumbents"): Celery 5 (Python), Sidekiq 6
# (Ruby) and BullMQ (Node), each on Debian's redis-server at the settings
# its documentation gives for many short jobs, twice: Redis's default
# persistence (RDB snapshots, no fsync per write) and `appendonly yes` with
# `appendfsync always` (every write on disk before its reply: the
# durability pgjobd has); and pgjobd's process handlers in the same three
# languages (clients/), on a PostgreSQL at full durability (fsync and
# synchronous_commit on, history kept: the default retention of 7 days).
#
#   tests/bench/incumbents.sh [N] [RUNS] [LATENCY_SAMPLES] [SYSTEMS]
#       N 20000 jobs, RUNS 3, LATENCY_SAMPLES 200; SYSTEMS a comma list of
#       celery,sidekiq,bullmq,pgjobd-py,pgjobd-rb,pgjobd-js (all of them)
#
# Every system runs the same no-op job on 2 processes (pgjobd's workers;
# Celery's prefork children; Sidekiq and BullMQ processes), at each of
# CONCURRENCY's jobs at once per process (default "8 64"; Celery, whose
# children run one task at a time, keeps its prefetch of 64 and runs once):
# 8 is close to each peer's default, 64 is past what each documents for
# short jobs (Sidekiq: "not above 50"), and each system's best row is the
# one to compare.
# Each run of a system: N jobs enqueued first, then its workers started and
# the drain timed from its first job to its Nth (tests/bench/incumbents/
# drive.py: each handler writes a byte to a FIFO), with the CPU time its
# processes used meanwhile, from /proc as scale.sh does: the peer's and
# Redis's, or pgjobd's, PostgreSQL's and the handler copies'.  Then, the
# queue idle, LATENCY_SAMPLES jobs enqueued one at a time with pauses
# (50 ms, +-50%) between, each timed from its enqueue to its handler's
# start: p50 and p99.  Systems take turns, run after run, so that a slow
# minute of a shared machine falls on all of them; the medians of RUNS are
# printed.  Figures only, no thresholds.
#
# Installs what it needs with scripts/bench-deps.sh (redis-server,
# python3-celery, ruby-sidekiq from Debian; bullmq from npm into the build
# dir).  Redis listens on a unix socket in the run's directory only.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
n=${1:-20000}
runs=${2:-3}
lat_n=${3:-200}
systems=${4:-celery,sidekiq,bullmq,pgjobd-py,pgjobd-rb,pgjobd-js}
concurrency=${CONCURRENCY:-8 64}
here=$root/tests/bench/incumbents
# Debian's interpreters, whose packages the peers are (not a python3 that
# PATH may find first, a pyenv's say).
py=/usr/bin/python3
dir="$build/bench-incumbents"
node_dir="$dir/node"
mkdir -p "$dir"
bash "$root/scripts/bench-deps.sh" "$node_dir"
cmake --build "$build" -j"$(nproc)" --target pgjobd pgjob >/dev/null

export BENCH_REDIS_SOCK="$dir/redis.sock" BENCH_FIFO="$dir/fifo"
export NODE_PATH="$node_dir/node_modules"
export PGJOBD_CLIENT_JS="$root/clients/node/pgjobd-handler.js"
rm -f "$BENCH_FIFO" && mkfifo "$BENCH_FIFO"

PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir/pg" >/dev/null
db=$(cat "$dir/pg/conninfo")
postmaster=$(head -1 "$dir/pg/data/postmaster.pid")
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" "$@"; }

redis_pid= workers=
stop_workers() {
	local p
	for p in $workers; do kill -TERM "$p" 2>/dev/null || true; done
	for p in $workers; do wait "$p" 2>/dev/null || true; done
	workers=
}
stop_redis() {
	[ -n "$redis_pid" ] || return 0
	kill -TERM "$redis_pid" 2>/dev/null || true
	wait "$redis_pid" 2>/dev/null || true
	redis_pid=
}
cleanup() {
	stop_workers
	stop_redis
	bash "$root/scripts/testpg.sh" stop "$dir/pg" >/dev/null
}
trap cleanup EXIT

# A fresh Redis: default persistence, or every write fsynced ("aof").
start_redis() { # default|aof
	stop_redis
	rm -rf "$dir/redis" && mkdir -p "$dir/redis"
	local extra=()
	[ "$1" = aof ] && extra=(--appendonly yes --appendfsync always)
	redis-server --port 0 --unixsocket "$BENCH_REDIS_SOCK" --unixsocketperm 700 \
		--dir "$dir/redis" --logfile "$dir/redis/log" "${extra[@]}" &
	redis_pid=$!
	until redis-cli -s "$BENCH_REDIS_SOCK" ping >/dev/null 2>&1; do
		kill -0 "$redis_pid" || { echo "incumbents: redis did not start: $dir/redis/log" >&2; exit 1; }
		sleep 0.05
	done
}

# The peers' enqueuers, workers and latency enqueuers, by name.
enqueue() { # system n
	case $1 in
	celery) (cd "$here" && "$py" celery_app.py enqueue "$2") ;;
	sidekiq) ruby "$here/sidekiq_app.rb" enqueue "$2" ;;
	bullmq) node "$here/bullmq.js" enqueue "$2" ;;
	pgjobd-*)
		sql -c "insert into pgjob.jobs (kind, payload) select '$(kind "$1")', jsonb_build_object('id', i) from generate_series(1, $2) i" \
			-c "vacuum analyze pgjob.jobs" -c "checkpoint" ;;
	esac
}
kind() { case $1 in pgjobd-py) echo noop_py ;; pgjobd-rb) echo noop_rb ;; pgjobd-js) echo noop_js ;; esac; }
lines_cmd() { # system: a command that enqueues a job per line it reads
	case $1 in
	celery) echo "env PYTHONPATH=$here $py $here/celery_app.py lines" ;;
	sidekiq) echo "ruby $here/sidekiq_app.rb lines" ;;
	bullmq) echo "node $here/bullmq.js lines" ;;
	pgjobd-*) echo "bash -c 'while read -r _; do echo \"insert into pgjob.jobs (kind, payload) values ('\\''$(kind "$1")'\\'', jsonb_build_object('\\''t'\\'', extract(epoch from clock_timestamp())));\"; done | psql -X -q \"$db\" >/dev/null'" ;;
	esac
}
# Starts the workers; writes the pid groups drive.py measures.
start_workers() { # system
	local p
	: >"$dir/pids.tmp"
	case $1 in
	celery)
		# optimizing.html: a large prefetch for many short tasks;
		# no heartbeat, gossip or mingle events between workers.
		(cd "$here" && exec "$py" -m celery -A celery_app worker -Q bench \
			-P prefork -c 2 --prefetch-multiplier 64 --without-heartbeat \
			--without-gossip --without-mingle --loglevel WARNING) \
			>>"$dir/celery.log" 2>&1 &
		workers=$!
		echo "peer * $workers" >>"$dir/pids.tmp" ;;
	sidekiq)
		for _ in 1 2; do
			sidekiq -r "$here/sidekiq_app.rb" -c "$conc" -q default >>"$dir/sidekiq.log" 2>&1 &
			workers="$workers $!"
			echo "peer * $!" >>"$dir/pids.tmp"
		done ;;
	bullmq)
		for _ in 1 2; do
			node "$here/bullmq.js" worker "$conc" >>"$dir/bullmq.log" 2>&1 &
			workers="$workers $!"
			echo "peer * $!" >>"$dir/pids.tmp"
		done ;;
	pgjobd-*)
		"$build/pgjobd" -c "$dir/pgjobd.yaml" -d "$db" 2>>"$dir/pgjobd.log" &
		workers=$!
		{ echo "pgjobd pgjobd $workers"; echo "handler !pgjobd $workers"; } >>"$dir/pids.tmp" ;;
	esac
	[ "$1" = "${1#pgjobd}" ] && echo "redis * $redis_pid" >>"$dir/pids.tmp"
	case $1 in pgjobd-*) echo "postgres postgres $postmaster" >>"$dir/pids.tmp" ;; esac
	mv "$dir/pids.tmp" "$dir/pids"
}

cat >"$dir/pgjobd.yaml.in" <<YAML
workers: 2
log: { level: warn }
queues: { default: { concurrency: CONC } }
handlers:
  noop_py:
    type: process
    command: ["$py", "$here/pgjobd_noop.py"]
    env: ["PYTHONPATH=$root/clients/python", "BENCH_FIFO=$BENCH_FIFO"]
    copies: 1
    concurrency: CONC
  noop_rb:
    type: process
    command: ["ruby", "$here/pgjobd_noop.rb"]
    env: ["PGJOBD_CLIENT=$root/clients/ruby/pgjobd_handler.rb", "BENCH_FIFO=$BENCH_FIFO"]
    copies: 1
    concurrency: CONC
  noop_js:
    type: process
    command: ["node", "$here/pgjobd_noop.js"]
    env: ["PGJOBD_CLIENT=$PGJOBD_CLIENT_JS", "BENCH_FIFO=$BENCH_FIFO"]
    copies: 1
    concurrency: CONC
YAML

# One run of a system on a setting (redis default|aof, or pg) at a
# concurrency: appends "rate cpu... p50 p99" to its results file.
one() { # system setting concurrency
	local sys=$1 setting=$2 out
	conc=$3
	case $sys in
	pgjobd-*)
		sed "s/CONC/$conc/" "$dir/pgjobd.yaml.in" >"$dir/pgjobd.yaml"
		sql -c "drop schema if exists pgjob cascade" 2>/dev/null
		"$build/pgjob" -d "$db" migrate >/dev/null ;;
	*) start_redis "$setting" ;;
	esac
	enqueue "$sys" "$n" >/dev/null
	rm -f "$dir/pids" "$BENCH_FIFO.ready"
	"$py" "$here/drive.py" drain "$BENCH_FIFO" "$n" "$dir/pids" 900 >"$dir/drain.out" &
	local drv=$!
	until [ -e "$BENCH_FIFO.ready" ] || ! kill -0 "$drv" 2>/dev/null; do sleep 0.01; done
	start_workers "$sys"
	wait "$drv" || { echo "incumbents: $sys ($setting): the drain failed; logs in $dir" >&2; exit 1; }
	out=$(cat "$dir/drain.out")
	sleep 1 # the queue idle
	out="$out $("$py" "$here/drive.py" latency "$BENCH_FIFO" "$lat_n" 50 60 -- bash -c "$(lines_cmd "$sys")")"
	stop_workers
	[ "$sys" = "${sys#pgjobd}" ] && stop_redis
	echo "$out" >>"$dir/results.$sys.$setting.$conc"
	echo "  $sys ($setting, $conc): $out"
}

rows=()
IFS=, read -r -a list <<<"$systems"
for s in "${list[@]}"; do
	for c in $concurrency; do
		case $s in
		celery) [ "$c" = "${concurrency%% *}" ] && rows+=("$s:default:64" "$s:aof:64") ;;
		sidekiq | bullmq) rows+=("$s:default:$c" "$s:aof:$c") ;;
		pgjobd-py | pgjobd-rb | pgjobd-js) rows+=("$s:pg:$c") ;;
		*) echo "incumbents: unknown system $s" >&2; exit 2 ;;
		esac
	done
done
rm -f "$dir"/results.*
echo "machine: $(nproc) cores; jobs=$n runs=$runs latency samples=$lat_n concurrency=$concurrency"
for r in $(seq "$runs"); do
	echo "round $r"
	for row in "${rows[@]}"; do
		IFS=: read -r sys setting c <<<"$row"
		one "$sys" "$setting" "$c"
	done
done

# Medians: jobs/s, CPU us/job per process group, wake-up p50/p99 (ms).
echo
printf '%-10s %-13s %5s %8s  %-44s %8s %8s\n' system storage conc "jobs/s" "CPU us/job" "p50 ms" "p99 ms"
for row in "${rows[@]}"; do
	IFS=: read -r sys setting c <<<"$row"
	case $setting in
	default) storage="redis (rdb)" ;; aof) storage="redis fsync" ;; pg) storage="pg durable" ;;
	esac
	"$py" - "$dir/results.$sys.$setting.$c" "$sys" "$storage" "$c" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = lambda xs: statistics.median(xs)
rate = med([float(r[0]) for r in rows])
cpu = {}
for r in rows:
    for kv in r[1:-2]:
        k, v = kv.split("=")
        cpu.setdefault(k, []).append(float(v))
cpus = " ".join("%s %.0f" % (k, med(v)) for k, v in cpu.items())
total = sum(med(v) for v in cpu.values())
p50 = med([float(r[-2]) for r in rows])
p99 = med([float(r[-1]) for r in rows])
print("%-10s %-13s %5s %8.0f  %-44s %8.2f %8.2f" % (sys.argv[2], sys.argv[3], sys.argv[4], rate,
      "%s (all %.0f)" % (cpus, total), p50, p99))
PY
done
