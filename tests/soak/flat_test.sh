#!/usr/bin/env bash
# flat.py's verdicts (ctest soak.flat): a made-up soak report of nine
# intervals in which one figure grows, one has a single spike (a fault's
# interval), the backlog moves within a second's load, the dead tuples
# jump after a restart and stay there, and the wake-up p99 falls (better,
# not NOT_FLAT).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rep=$(mktemp)
trap 'rm -f "$rep"' EXIT
{
	echo "soak: 90 min, maximum 120 jobs/s, load 60 jobs/s, report every 600s"
	for i in 1 2 3 4 5 6 7 8 9; do
		spike=300
		[ "$i" = 5 ] && spike=2500
		dead=1000 wake=400
		[ "$i" -ge 6 ] && dead=4000 wake=200
		echo "t=$((i * 10))m jobs_s=60 fed_s=60 backlog=$((10 + i * 5)) claim_p99_ms=$spike" \
			"wake_p99_ms=$wake table_mb=6.0 index_mb=2.5 dead_tuples=$dead" \
			"sup_rss_kb=$((15000 + i * 400)) sup_fds=18 worker_rss_kb=22000 worker_fds=36"
	done
} >"$rep"
out=$(/usr/bin/python3 "$here/flat.py" "$rep" 600 660s)
echo "$out"
expect() {
	grep -q -- "$1" <<<"$out" || { echo "flat_test: expected $1" >&2; exit 1; }
}
# Counted from t=20m (retention 11 min and a minute), thirds of 8 reports:
# medians of the first two and the last two.
expect "from t=20m to t=90m, medians of the first and last 2 reports"
expect "jobs_s=60->60\[60..60\]flat"
expect "claim_p99_ms=300->300\[300..2500\]flat"
expect "backlog=22.5->52.5\[20..55\]flat"
expect "sup_rss_kb=16000->18400\[15800..18600\]NOT_FLAT"
expect "dead_tuples=1000->4000\[1000..4000\]NOT_FLAT"
expect "wake_p99_ms=400->200\[200..400\]better"
expect "some figures got worse by more than 10 %"
