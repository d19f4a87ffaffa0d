#!/usr/bin/env bash
# The soak (docs/operations.md#soak): hours of mixed load at half the
# machine's maximum, with a fault every few minutes from a fixed schedule,
# a report every ten minutes, and at the end whether every figure stayed
# flat (within 10 %) and whether anything was lost.
#
#   tests/soak/soak.sh [--hours H | --minutes M] [--report-every 10m]
#                      [--fault-every 3m] [--rate N] [--keep]
#
# --rate N: the machine's maximum in jobs/s, instead of measuring it with
# a short run first.  PGJOBD_TEST_BIN: the build folder (default build/).
# Not part of ctest: it runs for hours (two by default).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$(cd "${PGJOBD_TEST_BIN:-$root/build}" && pwd)

usage() {
	echo "usage: soak.sh [--hours H | --minutes M] [--report-every 10m] [--fault-every 3m] [--rate N] [--keep]" >&2
	exit 2
}
secs() { # 90s, 10m, 2h, or seconds
	case $1 in
	*h) echo $((${1%h} * 3600)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*[!0-9]* | '') usage ;;
	*) echo "$1" ;;
	esac
}
duration=7200 report_every=600 fault_every=180 max_rate='' keep=0
while [ $# -gt 0 ]; do
	case $1 in
	--hours) duration=$(awk -v h="$2" 'BEGIN {printf "%d", h * 3600}'); shift ;;
	--minutes) duration=$(($2 * 60)); shift ;;
	--report-every) report_every=$(secs "$2"); shift ;;
	--fault-every) fault_every=$(secs "$2"); shift ;;
	--rate) max_rate=$2; shift ;;
	--keep) keep=1 ;;
	*) usage ;;
	esac
	shift
done

dir=$bin/tmp/soak-$$
rm -rf "$dir"
mkdir -p "$dir"
ninst=2 nworkers=2
# Finished jobs are kept for a report's interval and a minute more: the
# tables reach their size after that, and should then stay flat.
chaos_retention="$((report_every + 60))s"
# shellcheck source=tests/fault/chaos_lib.sh
. "$root/tests/fault/chaos_lib.sh"
ok=0
finish() {
	chaos_cleanup
	if [ "$ok" = 1 ] && [ "$keep" = 0 ]; then rm -rf "$dir"; else echo "soak: files in $dir" >&2; fi
}
trap finish EXIT

out() { echo "$*" | tee -a "$dir/report"; }

chaos_setup_db
chaos_start_all

# The maximum: the time a backlog of the default queue's mix (sqlj and
# execj, half each) takes to drain through the same instances.
if [ -z "$max_rate" ]; then
	backlog=3000
	dbq -c "select 'J', pgjob.enqueue(case when i % 2 = 0 then 'sqlj' else 'execj' end, jsonb_build_object('max', i)) from generate_series(1, $backlog) i" >>"$dir/enqueued"
	t0=$(date +%s%N)
	until [ "$(dbq -c "select count(*) from pgjob.jobs where finished_at is null")" = 0 ]; do sleep 0.2; done
	max_rate=$((backlog * 1000000000 / ($(date +%s%N) - t0)))
fi
rate=$((max_rate / 2))
[ "$rate" -ge 2 ] || rate=2
chaos_start_web
chaos_start_sampler
out "soak: $((duration / 60)) min, maximum $max_rate jobs/s, load $rate jobs/s, report every ${report_every}s, a fault every ${fault_every}s, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# The instances' processes: supervisors and their workers.
procs() {
	local i s w
	for ((i = 0; i < ninst; i++)); do
		s=${sups[$i]:-}
		[ -n "$s" ] || continue
		echo "i$i.s $s"
		for w in $(ps -o pid= --ppid "$s"); do
			[ "$(cat "/proc/$w/comm" 2>/dev/null)" = pgjobd ] && echo "i$i.w $w"
		done
	done
}

# A worker's descriptors, less those it holds for a live child (an exec
# job's pipes, whose other ends the child holds, and a pidfd a child): a
# job in flight is not a leak, and a reading that counts them moves with
# how many ran at that instant.  Prints "own held".
worker_fds() {
	local p=$1 c l own=0 held=0 kids=0 pidfds=0
	local -A theirs=()
	for c in $(cat "/proc/$p/task/$p/children" 2>/dev/null); do
		kids=$((kids + 1))
		for l in "/proc/$c/fd/"*; do
			l=$(readlink "$l" 2>/dev/null) || continue
			case $l in pipe:*) theirs[$l]=1 ;; esac
		done
	done
	for l in "/proc/$p/fd/"*; do
		l=$(readlink "$l" 2>/dev/null) || continue
		case $l in
		pipe:*) [ -z "${theirs[$l]:-}" ] || { held=$((held + 1)); continue; } ;;
		'anon_inode:[pidfd]')
			if [ "$pidfds" -lt "$kids" ]; then
				pidfds=$((pidfds + 1)) held=$((held + 1))
				continue
			fi
			;;
		esac
		own=$((own + 1))
	done
	echo "$own $held"
}

last_sql=$(dbq -c "select count(*) from ledger_sql") last_exec=$(wc -l <"$ledger") last_t=$(date +%s) nreport=0
last_fed=$(wc -l <"$dir/enqueued")
report() {
	local now sqlr execr dt jobs_s claim wake sizes fed fed_s backlog mem=""
	now=$(date +%s)
	sqlr=$(dbq -c "select count(*) from ledger_sql" 2>/dev/null || echo "$last_sql")
	execr=$(wc -l <"$ledger")
	dt=$((now - last_t))
	jobs_s=$(awk -v a=$((sqlr - last_sql + execr - last_exec)) -v d="$dt" 'BEGIN {printf "%.1f", a / d}')
	# What was fed (commits the feeder saw) and what waits: a machine
	# too busy for the load shows as a backlog that grows.
	fed=$(wc -l <"$dir/enqueued")
	fed_s=$(awk -v a=$((fed - last_fed)) -v d="$dt" 'BEGIN {printf "%.1f", a / d}')
	backlog=$(dbq -c "select count(*) from pgjob.jobs where finished_at is null" 2>/dev/null || echo -)
	# Claim latency: from due to claimed, of the jobs claimed in the
	# interval (attempted_at and run_at are both the database's).
	claim=$(dbq -c "select coalesce(round(1000 * extract(epoch from percentile_disc(0.99) within group (order by attempted_at - greatest(run_at, created_at))))::bigint, -1) from pgjob.all_jobs where attempted_at > now() - make_interval(secs => $dt) and queue = 'default' and workflow_id is null" 2>/dev/null || echo -1)
	wake=$(dbq -c "select coalesce(round(1000 * extract(epoch from percentile_disc(0.99) within group (order by wake)))::bigint, -1) from ledger_wake where at > now() - make_interval(secs => $dt)" 2>/dev/null || echo -1)
	sizes=$(dbq -F ' ' -c "select round(sum(pg_table_size(c.oid)) / 1048576.0, 1), round(sum(pg_indexes_size(c.oid)) / 1048576.0, 1), (select sum(n_dead_tup) from pg_stat_user_tables where schemaname = 'pgjob') from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'pgjob' and c.relkind = 'r'" 2>/dev/null || echo "- - -")
	local rss_s=0 rss_w=0 fd_s=0 fd_w=0 fd_j=0 nw=0 name p r f h
	while read -r name p; do
		r=$(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
		case $name in
		*.s)
			f=$(find "/proc/$p/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
			mem="$mem $name=$((r / 1024))M/${f}fd"
			rss_s=$((rss_s + r)) fd_s=$((fd_s + f))
			;;
		*)
			read -r f h <<<"$(worker_fds "$p")"
			mem="$mem $name=$((r / 1024))M/${f}+${h}fd"
			rss_w=$((rss_w + r)) fd_w=$((fd_w + f)) fd_j=$((fd_j + h)) nw=$((nw + 1))
			;;
		esac
	done < <(procs)
	nreport=$((nreport + 1))
	out "t=$(((now - start) / 60))m jobs_s=$jobs_s fed_s=$fed_s backlog=$backlog claim_p99_ms=$claim wake_p99_ms=$wake table_mb=$(cut -d' ' -f1 <<<"$sizes") index_mb=$(cut -d' ' -f2 <<<"$sizes") dead_tuples=$(cut -d' ' -f3 <<<"$sizes") sup_rss_kb=$rss_s sup_fds=$fd_s worker_rss_kb=$rss_w worker_fds=$fd_w job_fds=$fd_j workers=$nw faults=$nfaults load=$(cut -d' ' -f1 /proc/loadavg)"
	out "  processes:$mem"
	last_sql=$sqlr last_exec=$execr last_t=$now last_fed=$fed
}

# The fixed schedule of faults, in turn.
nfaults=0
schedule=(kill_worker conn_reset sigstop pause kill_supervisor schedules pg_restart kill_worker conn_reset)
fault() {
	local f=${schedule[$((nfaults % ${#schedule[@]}))]}
	nfaults=$((nfaults + 1))
	case $f in
	kill_worker) fault_kill_worker ;;
	conn_reset) fault_conn_reset ;;
	sigstop) fault_sigstop ;;
	kill_supervisor) fault_kill_supervisor ;;
	pg_restart) fault_pg_restart ;;
	pause) console_pause fq; pause_until=$(($(date +%s) + 20)) ;;
	schedules) console_disable tock; console_run tick; enable_at=$(($(date +%s) + 90)) ;;
	esac
	chaos_log "fault $nfaults: $f"
}

start=$(date +%s)
next_report=$((start + report_every)) next_fault=$((start + fault_every / 2))
next_wf=$start next_batch=$start seal_at=0 join_at=0 pause_until=0 enable_at=0
k=0
chaos_weights
while [ "$(date +%s)" -lt $((start + duration)) ]; do
	t=$(date +%s)
	k=$((k + 1))
	# One second of load in one statement: the default queue's mix, a
	# job into each limited queue (their limits bind at a few a second),
	# and a wake-up probe into the idle queue wake.
	dbq -c "select 'J', pgjob.enqueue(case when i % 2 = 0 then 'sqlj' else 'execj' end, jsonb_build_object('i', i)) from generate_series(1, $rate) i
		union all select 'J', pgjob.enqueue(kind, '{}', queue => q, limit_key => lk, cost => c)
		  from (values ('gcx', 'gc', null, 1), ('rlx', 'rl', null, 1 + $k % 3),
			       ('fqx', 'fq', case when $k % 2 = 0 then 'heavy' else 'light' end, 1)) v(kind, q, lk, c)
		union all select 'P', pgjob.enqueue('wakej', jsonb_build_object('t', clock_timestamp()), queue => 'wake')" \
		>>"$dir/enqueued" 2>/dev/null || true
	if [ "$t" -ge "$next_wf" ]; then
		chaos_enqueue_workflows 1 "$k" 2>/dev/null || true
		console_retry_dead
		next_wf=$((t + 60))
	fi
	if [ "$t" -ge "$next_batch" ]; then
		chaos_batches_open 1 2>/dev/null || true
		join_at=$((t + 20)) seal_at=$((t + 40)) next_batch=$((t + 120))
	fi
	[ "$join_at" -gt 0 ] && [ "$t" -ge "$join_at" ] && { chaos_batches_join 1 2>/dev/null || true; join_at=0; }
	[ "$seal_at" -gt 0 ] && [ "$t" -ge "$seal_at" ] && { chaos_batches_seal 2>/dev/null || true; seal_at=0; }
	[ "$pause_until" -gt 0 ] && [ "$t" -ge "$pause_until" ] && { console_resume fq; pause_until=0; }
	[ "$enable_at" -gt 0 ] && [ "$t" -ge "$enable_at" ] && { console_enable tock; enable_at=0; }
	[ "$t" -ge "$next_fault" ] && { fault; next_fault=$((t + fault_every)); }
	[ "$t" -ge "$next_report" ] && { report; next_report=$((next_report + report_every)); }
	sleep "$(awk -v s="$(date +%s.%N)" -v t="$t" 'BEGIN {d = t + 1 - s; print (d > 0 ? d : 0)}')"
done
[ $(($(date +%s) - last_t)) -ge $((report_every / 2)) ] && report
[ "$pause_until" -gt 0 ] && console_resume fq
[ "$enable_at" -gt 0 ] && console_enable tock
chaos_batches_seal 2>/dev/null || true

# Drain, then the end: each figure flat, nothing lost.
deadline=$(($(date +%s) + 600))
until chaos_settled; do
	[ "$(date +%s)" -lt "$deadline" ] || { echo "soak: not drained after 10 min" >&2; break; }
	console_retry_dead
	sleep 1
done
chaos_stop || true
rc=0
python3 "$root/tests/fault/chaos_check.py" --soak --scenario soak --dir "$dir" --conninfo "$ci" \
	--instances "$ninst" --workers "$nworkers" --wall-ms $((($(date +%s) - start) * 1000)) 2>&1 |
	tee -a "$dir/report" || rc=1
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
python3 "$root/tests/soak/flat.py" "$dir/report" "$report_every" "$chaos_retention" | tee -a "$dir/report"
[ "$rc" = 0 ] && ok=1
exit "$rc"
