# shellcheck shell=bash
# Sourced by scripts/deps.sh, bench-deps.sh and ha-deps.sh: one way to
# install Debian's packages.
#
#   apt_install WHO WHY PKG...
#
# installs those of PKG that are missing (nothing that is there already),
# as root or through sudo, and returns apt-get's status; WHO names the
# caller in its messages.  Packages such as postgresql, pgbouncer, redis,
# etcd and haproxy would each start a service of their own, which the
# tests and benchmarks do not want (they start their own servers, and a
# service would hold the ports): a policy-rc.d keeps every service from
# starting during the install, unless the machine has a policy of its own.
# WHY goes into that file, for whoever finds it left by a killed install.
apt_install() {
	local who=$1 why=$2
	shift 2
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q '^install ok installed$' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	local sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || {
			echo "$who: not root and no sudo: install ${missing[*]} as root" >&2
			return 1
		}
		sudo=(sudo)
	fi
	echo "$who: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq
	local policy=/usr/sbin/policy-rc.d made=0 rc=0
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# %s\nexit 101\n' "$why" |
			"${sudo[@]}" tee "$policy" >/dev/null
		"${sudo[@]}" chmod 755 "$policy"
		made=1
	fi
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null || rc=$?
	[ "$made" = 0 ] || "${sudo[@]}" rm -f "$policy"
	return "$rc"
}
