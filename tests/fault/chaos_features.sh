#!/usr/bin/env bash
# Chaos on the features (docs/faults.md#chaos-on-the-features): every newer
# feature at once (a global_concurrency queue, a rate-limited queue with
# costs, a fair queue with weights, workflows with fan-out, fan-in and each
# on_parent_failure policy, batches joined while running, schedules run and
# disabled from the console, bulk retries from the console, a queue paused
# from the console) under kill -9 of workers and supervisors, SIGSTOP past
# the lease, PostgreSQL restarts and connection resets; then
# tests/fault/chaos_check.py checks the database and the ledgers and prints
# the figures line.
#
#   chaos_features.sh [--long] [--cycles N] [--keep]
#
# The short form (ctest fault.chaos) runs one cycle of 15 s of faults; --long
# (or PGJOBD_FAULT_LONG=1) runs 8 cycles with five times the default
# queue's workload per cycle.  PGJOBD_TEST_BIN
# (the build folder) and PGJOBD_SOURCE as for the fault suite;
# PGJOBD_FAULT_FIGURES=FILE appends the figures line to FILE.
set -euo pipefail
root=${PGJOBD_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
root=$(cd "$root" && pwd)
bin=$(cd "${PGJOBD_TEST_BIN:-$root/build}" && pwd)

cycles=1 scale=1 keep=0
# The fault suite's switch for its long form (docs/faults.md).
case ${PGJOBD_FAULT_LONG:-0} in 0 | '') ;; *) cycles=8 scale=5 ;; esac
while [ $# -gt 0 ]; do
	case $1 in
	--long) cycles=8 scale=5 ;;
	--cycles) cycles=$2; shift ;;
	--keep) keep=1 ;;
	*) echo "usage: chaos_features.sh [--long] [--cycles N] [--keep]" >&2; exit 2 ;;
	esac
	shift
done

dir=$bin/tmp/chaos-$$
rm -rf "$dir"
mkdir -p "$dir"
ninst=2 nworkers=2
# shellcheck source=tests/fault/chaos_lib.sh
. "$root/tests/fault/chaos_lib.sh"

ok=0
finish() {
	chaos_cleanup
	if [ "$ok" = 1 ] && [ "$keep" = 0 ]; then
		rm -rf "$dir"
	else
		echo "chaos: logs, configs and ledgers in $dir" >&2
	fi
}
trap finish EXIT

begin=$(date +%s%N)
chaos_setup_db
chaos_enqueue_base "$scale"
chaos_weights
chaos_enqueue_workflows "$scale" 0
chaos_batches_open "$scale"
chaos_start_all
chaos_start_web
chaos_start_sampler
chaos_log "$ninst instances x $nworkers workers, $cycles cycle(s), scale $scale, in $dir"

ms() { echo $((($(date +%s%N) - c0) / 1000000)); }

# One cycle: 15 s of faults and console actions at fixed offsets (ms);
# meanwhile the nemesis kills a worker or resets a session every 1.5 s.
declare -A did
cycle() {
	local c=$1 t
	did=()
	c0=$(date +%s%N)
	chaos_nemesis
	if [ "$c" -gt 1 ]; then
		chaos_enqueue_base "$scale"
		chaos_enqueue_workflows "$scale" "$c"
		chaos_batches_open "$scale"
	fi
	at() { [ "$(ms)" -ge "$1" ] && [ -z "${did[$2]:-}" ] && did[$2]=1; }
	while t=$(ms) && [ "$t" -lt 15000 ]; do
		at 1000 pause && console_pause fq
		at 1500 disable && console_disable tock
		at 3000 wave && { chaos_enqueue_workflows "$scale" "$c.2"; chaos_batches_join "$scale"; }
		at 4000 sigstop && fault_sigstop
		at 5000 retry1 && console_retry_dead
		at 6000 resume && console_resume fq
		at 6500 run && { console_run tick; console_run tock; }
		at 7500 supkill && fault_kill_supervisor
		at 8000 seal && chaos_batches_seal
		at 9000 retry2 && console_retry_dead
		at 10000 pgrestart && fault_pg_restart
		at 12000 enable && console_enable tock
		at 13000 run2 && console_run tick
		chaos_trickle "$((t / 250))"
		sleep 0.25
	done
	chaos_nemesis_stop
}

for c in $(seq 1 "$cycles"); do
	cycle "$c"
done

# Settle: dead failonce steps are retried from the console until none is
# left, and the run ends when every job, batch and run request has.
deadline=$(($(date +%s) + 180 * cycles))
until chaos_settled; do
	if [ "$(date +%s)" -gt "$deadline" ]; then
		echo "chaos: not settled after the faults" >&2
		dbq -c "select id, queue, kind, state, attempts, last_error from pgjob.jobs where finished_at is null or state = 'dead' order by id limit 20" >&2 || true
		break
	fi
	console_retry_dead
	sleep 0.5
done
stop_rc=0
chaos_stop || stop_rc=$?
# Nothing whose command line names the run's folder (daemons, handlers)
# outlives the instances.
for _ in $(seq 1 150); do
	left=$(pgrep -f -- "$dir/" || true)
	[ -z "$left" ] && break
	sleep 0.1
done
if [ -n "$left" ]; then
	echo "chaos: processes left after the run: $left" >&2
	stop_rc=1
fi
wall=$((($(date +%s%N) - begin) / 1000000))

rc=0
python3 "$root/tests/fault/chaos_check.py" --dir "$dir" --conninfo "$ci" \
	--instances "$ninst" --workers "$nworkers" --wall-ms "$wall" \
	--figures "${PGJOBD_FAULT_FIGURES:-}" || rc=$?
[ "$stop_rc" = 0 ] || rc=1
[ "$rc" = 0 ] && ok=1
exit "$rc"
