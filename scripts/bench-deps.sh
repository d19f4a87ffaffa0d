#!/usr/bin/env bash
# Installs what tests/bench/incumbents.sh needs and the tests do not, so it
# is kept out of scripts/deps.sh: Redis and the incumbents that run on it
# (Celery 5 and Sidekiq 6 from Debian's packages), and BullMQ from npm into
# a directory under the build dir (never committed).  Nothing that is already
# there is installed again.  Uses sudo when not root.
#
#   scripts/bench-deps.sh [NODE_DIR]     (NODE_DIR: where bullmq goes)
set -euo pipefail
node_dir=${1:-}

pkgs=(redis-server python3-celery python3-redis ruby-sidekiq ruby-redis
      nodejs python3 ruby procps postgresql-15 postgresql-client-15)
# NodeSource's nodejs carries npm (and conflicts with Debian's npm).
command -v npm >/dev/null 2>&1 || pkgs+=(npm)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || {
			echo "bench-deps: not root and no sudo: install ${missing[*]} as root" >&2
			exit 1
		}
		sudo=(sudo)
	fi
	echo "bench-deps: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq
	# redis-server would start a service of its own: the bench starts its
	# own servers on loopback, so none starts during the install unless the
	# machine has a policy of its own.
	policy=/usr/sbin/policy-rc.d
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# scripts/bench-deps.sh: no service starts during its install\nexit 101\n' |
			"${sudo[@]}" tee "$policy" >/dev/null
		"${sudo[@]}" chmod 755 "$policy"
		trap '"${sudo[@]}" rm -f "$policy"' EXIT
	fi
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# BullMQ is not packaged by Debian: from the npm registry, its version
# pinned by major so that reruns measure the same library.
if [ -n "$node_dir" ] && [ ! -d "$node_dir/node_modules/bullmq" ]; then
	mkdir -p "$node_dir"
	[ -e "$node_dir/package.json" ] || echo '{"private": true}' >"$node_dir/package.json"
	echo "bench-deps: npm install bullmq@5 into $node_dir" >&2
	(cd "$node_dir" && npm install --no-audit --no-fund --silent bullmq@5 >/dev/null)
fi
