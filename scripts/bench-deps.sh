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

# shellcheck source=scripts/aptlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/aptlib.sh"
apt_install bench-deps "scripts/bench-deps.sh: no service starts during its install" \
	"${pkgs[@]}"

# BullMQ is not packaged by Debian: from the npm registry, its version
# pinned by major so that reruns measure the same library.
if [ -n "$node_dir" ] && [ ! -d "$node_dir/node_modules/bullmq" ]; then
	mkdir -p "$node_dir"
	[ -e "$node_dir/package.json" ] || echo '{"private": true}' >"$node_dir/package.json"
	echo "bench-deps: npm install bullmq@5 into $node_dir" >&2
	(cd "$node_dir" && npm install --no-audit --no-fund --silent bullmq@5 >/dev/null)
fi
