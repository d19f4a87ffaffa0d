#!/usr/bin/env bash
# Installs the Debian packages that building and testing pgjobd need, and
# nothing that is already there.  Uses sudo when not root.
#
#   scripts/deps.sh          what building, running and every test need
#                            (scripts/test.sh, the README's test command)
#   scripts/deps.sh --run    what building and running need, no more
#                            (scripts/run.sh, the README's run command)
set -euo pipefail

run_only=0
case "${1:-}" in
--run) run_only=1 ;;
"") ;;
*) echo "deps: unknown argument \"$1\" (--run, or none)" >&2; exit 2 ;;
esac

# Building pgjobd (CMakeLists.txt's required libraries, the web console's
# HTTP server, the yescrypt password hashes of its users and zlib, which
# compresses its answers), running it
# against a private PostgreSQL (scripts/testpg.sh: initdb, pg_ctl, psql),
# and the time zones of its schedules.
pkgs=(build-essential cmake pkg-config
      libpq-dev libev-dev libcjson-dev libyaml-dev libcurl4-openssl-dev
      libmicrohttpd-dev libcrypt-dev libssl-dev zlib1g-dev
      postgresql-15 postgresql-client-15 tzdata)

if [ "$run_only" = 0 ]; then
	# The tests (cmocka), their checks of the sources (clang-format,
	# cppcheck) and the tools the tests call.
	pkgs+=(libcmocka-dev clang-format cppcheck procps systemd jq curl faketime)
	# The man pages' lint (ctest man) and Documentation= check
	# (test_systemd_units); the Debian package (ctest package).
	pkgs+=(mandoc man-db debhelper dpkg-dev fakeroot lintian)
	# The monitoring test (test_monitoring.sh): promtool, the server.
	pkgs+=(prometheus)
	# PgBouncer in front of the test server (scripts/testbouncer.sh,
	# test_pooler).
	pkgs+=(pgbouncer)
	# The several-hosts fault test (tests/fault/netns.sh): ip netns and
	# veths, the receiver of its http jobs.
	pkgs+=(iproute2 python3)
	# The web console's browser test (tests/browser/run.sh): headless
	# chromium driven by selenium.
	pkgs+=(chromium chromium-driver python3-selenium)
	# The clients of process handlers (clients/) and their tests
	# (tests/integration/test_process.c): Python (above), Node and Ruby.
	pkgs+=(nodejs ruby)
	# test_trace's OTLP receiver (tests/fixtures/otlp/receiver.js): npm
	# installs OpenTelemetry's package into the build folder.  NodeSource's
	# nodejs carries npm (and conflicts with Debian's npm).
	command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi

# shellcheck source=scripts/aptlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/aptlib.sh"
apt_install deps "scripts/deps.sh: no service starts during its install" \
	"${pkgs[@]}"
