#!/usr/bin/env bash
# Resident memory of a running pgjobd: the supervisor and its workers.
#   scripts/rss.sh [SUPERVISOR_PID]   (default: the oldest pgjobd process)
# Prints VmRSS, RssAnon, RssFile and RssShmem in KiB from /proc/PID/status
# (docs/daemon.md: the supervisor and each worker at most 8192 KiB at
# rest).
set -euo pipefail
sup=${1:-$(pgrep -o -x pgjobd || true)}
[ -n "$sup" ] || { echo "rss.sh: no pgjobd running" >&2; exit 1; }
show() {
	awk -v who="$1" -v pid="$2" '
		/^(VmRSS|RssAnon|RssFile|RssShmem):/ { v[$1] = $2 }
		END { printf "%-10s %7d  VmRSS %6d  RssAnon %6d  RssFile %6d  RssShmem %6d\n",
			who, pid, v["VmRSS:"], v["RssAnon:"], v["RssFile:"], v["RssShmem:"] }' \
		"/proc/$2/status"
}
show supervisor "$sup"
for w in $(pgrep -P "$sup" -x pgjobd || true); do
	show worker "$w"
done
