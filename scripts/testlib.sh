# shellcheck shell=bash
# What the throwaway servers of the tests share: sourced by
# scripts/testpg.sh, scripts/testbouncer.sh and tests/fault/cluster.sh.
#
#   as_server CMD ARGS...  runs CMD as $run_user when root (initdb,
#                          PostgreSQL and PgBouncer refuse root), else as is
#   free_port PREFIX       prints a free port on 127.0.0.1; without one,
#                          says "PREFIX: no free port" and exits 1

# run_user is the sourcing script's (it knows who runs its server).
# shellcheck disable=SC2154
as_server() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$run_user" -- "$@"
	else
		"$@"
	fi
}

free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 12000)) # below the ephemeral ports (32768 and up)
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
	echo "$1: no free port" >&2
	exit 1
}
