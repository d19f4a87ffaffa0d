# Hosts as Linux network namespaces on one bridge, for the tests that need
# several machines on this one (tests/fault/netns.sh, tests/ha/patroni.sh).
# Sourced, not run.  Root only.  The caller declares
#
#   declare -A NS ADDR     NS[name]: the namespace of host "name"
#   created=()             every namespace made, for netlib_teardown
#
# then calls netlib_switch NAMESPACE and netlib_host NAME for each host, with
# NS[NAME] and ADDR[NAME] set.  Every address lives on a veth inside the
# namespaces made here, nothing in the machine's own network namespace.

# netlib_switch NAMESPACE: the namespace that holds the bridge br0, which
# the hosts' links plug into.  Fails, with ip's message in netlib_err, when
# namespaces cannot be made here.  (Not in a $(...): it sets variables.)
netlib_switch() {
	netlib_err=$(ip netns add "$1" 2>&1) || return 1
	created+=("$1")
	netlib_sw=$1
	ip -n "$1" link set lo up
	ip -n "$1" link add br0 type bridge
	ip -n "$1" link set br0 up
}

# netlib_host NAME [PREFIXLEN]: namespace NS[NAME] with eth0 at ADDR[NAME]
# (a /24 unless said), plugged into the bridge as link vNAME.
netlib_host() {
	local n=$1
	ip netns add "${NS[$n]}"
	created+=("${NS[$n]}")
	ip -n "${NS[$n]}" link set lo up
	# The pair is created in the switch with its other end in the
	# namespace: nothing appears in the machine's own namespace.
	ip -n "$netlib_sw" link add "v$n" type veth peer name eth0 netns "${NS[$n]}"
	ip -n "$netlib_sw" link set "v$n" master br0 up
	ip -n "${NS[$n]}" addr add "${ADDR[$n]}/${2:-24}" dev eth0
	ip -n "${NS[$n]}" link set eth0 up
}

# netlib_link NAME up|down: host NAME's link at the bridge; down cuts the
# host off from every other one (its own loopback keeps working).
netlib_link() {
	ip -n "$netlib_sw" link set "v$1" "$2"
}

# netlib_teardown: kills whatever still runs in the namespaces made here
# (the caller's test started it all) and deletes them.
netlib_teardown() {
	local n p
	for n in "${created[@]}"; do
		for p in $(ip netns pids "$n" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null || true
		done
	done
	for n in "${created[@]}"; do
		ip netns del "$n" 2>/dev/null || true
	done
}
