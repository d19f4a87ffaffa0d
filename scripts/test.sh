#!/usr/bin/env bash
# The test command: installs what is missing, builds with warnings as errors,
# and runs every test through ctest.  ctest itself starts a throwaway
# PostgreSQL (the "pg" fixture, scripts/testpg.sh) and removes it at the end.
# Extra arguments go to ctest (for example -L unit, or -R config).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
# PGJOBD_SANITIZE=1: an AddressSanitizer + UBSan build in its own folder.
extra=()
if [ "${PGJOBD_SANITIZE:-0}" = 1 ]; then
	build=${PGJOBD_BUILD_DIR:-$root/build-asan}
	extra=(-DPGJOBD_SANITIZE=ON)
	# handle_segv=0: a plugin that crashes on purpose (the tests' own)
	# must kill its worker by SIGSEGV, as it would in production, not
	# exit 1 through the sanitizer's report.
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:handle_segv=0}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi

# Everything: building, running, and every test's tools (scripts/run.sh
# installs only the first two, and builds without the tests).
bash "$root/scripts/deps.sh"
cmake -S "$root" -B "$build" -DPGJOBD_WERROR=ON -DPGJOBD_TESTS=ON "${extra[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
# Should ctest be killed half-way, the fixture's cleanup never runs.
trap 'bash "$root/scripts/testpg.sh" stop "$build/testpg" >/dev/null 2>&1 || true' EXIT
cd "$build"
# Twice as many tests at once as cores: the integration tests share the
# "pg" fixture's server, each in a database of its own; the fault tests
# (their own clusters, fixed waits) take turns on RESOURCE_LOCK fault, those
# that start `pgjob web` on RESOURCE_LOCK web, and the benchmark and the 200
# workers run alone.  Most integration tests wait on daemons and PostgreSQL
# far more than they compute (a whole run uses about a quarter of two
# cores at -j2), so four at a time on two cores took the run from about 13
# to about 8 minutes; the fault chain (COST) starts first and the others
# fill the remaining places beside it.
ctest --output-on-failure --timeout 600 -j"$((2 * $(nproc)))" "$@"
