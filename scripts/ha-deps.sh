#!/usr/bin/env bash
# Installs the Debian packages the HA test (tests/ha/patroni.sh) needs on top
# of scripts/deps.sh's, and nothing that is already there.  Uses sudo when
# not root.  Not needed to build, run or test pgjobd (scripts/test.sh).
#
#   scripts/ha-deps.sh
#
# Patroni manages the PostgreSQL 15 servers, a three-member etcd is its
# store of the cluster's state (etcdctl, in etcd-client, checks it), HAProxy
# routes to the primary by Patroni's REST check, and tc (iproute2) slows a
# standby's network.
set -euo pipefail

[ $# -eq 0 ] || { echo "ha-deps: no arguments" >&2; exit 2; }

pkgs=(patroni etcd-server etcd-client haproxy iproute2 postgresql-15 python3)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || {
		echo "ha-deps: not root and no sudo: install ${missing[*]} as root" >&2
		exit 1
	}
	sudo=(sudo)
fi
echo "ha-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# etcd-server and haproxy would each start a service of their own (etcd on
# the loopback's 2379, which the test's members would then collide with);
# the test wants only the programs, so a policy-rc.d keeps the services from
# starting during the install, unless the machine already has one.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# scripts/ha-deps.sh: no service starts during its install\nexit 101\n' |
		"${sudo[@]}" tee "$policy" >/dev/null
	"${sudo[@]}" chmod 755 "$policy"
	trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
