#!/usr/bin/env bash
# The long form of the fuzzing: builds the libFuzzer targets with
# clang in a build folder of their own and runs each for a bounded time.
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]
#
# SECONDS is the time per target (default 60); TARGET is config, cron,
# process_proto, web, expand or workflow (default all six).  workflow runs
# against PGJOBD_FUZZ_DB, a database `pgjob migrate` made that nothing else
# uses meanwhile; without it, run.sh starts a throwaway PostgreSQL of its
# own (scripts/testpg.sh, under the build folder) and stops it after.  The working corpus grows in $FUZZ_BUILD/corpus/TARGET
# (default build folder: build-fuzz beside this source tree's build
# folders), seeded each run from the seed corpus.  A crash stops the run
# with exit 1 and leaves the input as $FUZZ_BUILD/artifacts/TARGET/crash-*:
# copy it into tests/fuzz/regressions/TARGET/ with a name that says what it
# is, and the plain ctest run (fuzz.TARGET.regressions) replays it from
# then on.  tests/fuzz/TARGET.dict, when there is one, is the target's
# dictionary.  FUZZ_MAX_LEN (default 8192) bounds the size of an input, and
# FUZZ_TIMEOUT (default 10) the seconds one input may take before it counts
# as a hang.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(config cron process_proto web expand workflow)
build=${FUZZ_BUILD:-$src/build-fuzz}

case $seconds in
'' | *[!0-9]*)
	echo "usage: run.sh [SECONDS] [config|cron|process_proto|web|expand|workflow...]" >&2
	exit 2
	;;
esac
command -v clang >/dev/null || {
	echo "run.sh: clang is needed (Debian: apt-get install clang)" >&2
	exit 1
}

mkdir -p "$build"
CC=clang cmake -S "$src" -B "$build" -DPGJOBD_FUZZ=ON \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/run.cmake.log" 2>&1 ||
	{ cat "$build/run.cmake.log" >&2; exit 1; }
build_targets=("${targets[@]/#/fuzz_}")
[[ " ${targets[*]} " == *" workflow "* ]] && build_targets+=(pgjob)
cmake --build "$build" -j"$(nproc)" \
	--target "${build_targets[@]}" >"$build/run.build.log" 2>&1 ||
	{ tail -50 "$build/run.build.log" >&2; exit 1; }

# fuzz_workflow's database: PGJOBD_FUZZ_DB, or a PostgreSQL of our own.
if [[ " ${targets[*]} " == *" workflow "* ]] && [ -z "${PGJOBD_FUZZ_DB:-}" ]; then
	bash "$src/scripts/testpg.sh" start "$build/pg" >"$build/pg.log" 2>&1 ||
		{ cat "$build/pg.log" >&2; exit 1; }
	trap 'bash "$src/scripts/testpg.sh" stop "$build/pg" >/dev/null 2>&1 || true' EXIT
	ci=$(cat "$build/pg/conninfo")
	psql "$ci" -qX -v ON_ERROR_STOP=1 -c 'create database fuzz_workflow' >/dev/null
	export PGJOBD_FUZZ_DB=${ci/dbname=postgres/dbname=fuzz_workflow}
	"$build/pgjob" --database "$PGJOBD_FUZZ_DB" migrate >/dev/null
fi

rc=0
for t in "${targets[@]}"; do
	corpus=$build/corpus/$t
	artifacts=$build/artifacts/$t
	mkdir -p "$corpus" "$artifacts"
	seeds=("$here/corpus/$t" "$here/regressions/$t")
	dict=()
	if [ "$t" = config ]; then
		cp "$src/config/example.yaml" "$corpus/seed-example.yaml"
		for f in "$src"/tests/fixtures/config/*.yaml; do
			cp "$f" "$corpus/seed-$(basename "$f")"
		done
	fi
	[ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
	echo "== fuzz_$t for ${seconds}s (corpus $corpus)"
	# Parsed by nothing: the last lines are the figures to report.
	if ! (cd "$artifacts" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-10}" \
		-rss_limit_mb=2048 -max_len="${FUZZ_MAX_LEN:-8192}" -print_final_stats=1 \
		-artifact_prefix="$artifacts/" "${dict[@]}" \
		"$corpus" "${seeds[@]}") >"$build/fuzz_$t.log" 2>&1; then
		echo "fuzz_$t: a crash; the input is in $artifacts:" >&2
		grep -E "ERROR|SUMMARY|Test unit written|No such" "$build/fuzz_$t.log" >&2 || tail -20 "$build/fuzz_$t.log" >&2
		rc=1
	fi
	grep -E '^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::peak_rss_mb|cov:' \
		"$build/fuzz_$t.log" | tail -3
done
exit $rc
