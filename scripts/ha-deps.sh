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

# shellcheck source=scripts/aptlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/aptlib.sh"
apt_install ha-deps "scripts/ha-deps.sh: no service starts during its install" \
	"${pkgs[@]}"
