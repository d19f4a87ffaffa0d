#!/usr/bin/env bash
# Run it: installs what is missing, builds, and shows pgjobd at work.
#
#   scripts/run.sh [--database CONNINFO]
#
# With no --database and no PG* variables, it starts a private PostgreSQL
# under build/demo-pg (and removes it at the end).  Then it migrates the
# schema, enqueues a few jobs for the handlers of config/example.yaml, runs
# pgjobd until they are done, and prints what happened.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
database=""

while [ $# -gt 0 ]; do
	case "$1" in
	--database) database=${2:?--database needs a conninfo}; shift 2 ;;
	--database=*) database=${1#--database=}; shift ;;
	-h|--help) sed -n '2,10p' "$0"; exit 0 ;;
	*) echo "run.sh: unknown argument \"$1\"" >&2; exit 2 ;;
	esac
done

say() { printf '\n== %s\n' "$*"; }

say "installing missing packages and building"
# Only what building and running need: scripts/test.sh installs the test
# tools and turns the tests back on in the same build folder.
bash "$root/scripts/deps.sh" --run
cmake -S "$root" -B "$build" -DPGJOBD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target pgjobd pgjob pgjobd_example >/dev/null
pgjob=("$build/pgjob")
pgjobd_args=()

cleanup() {
	[ -n "${daemon:-}" ] && kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	[ -n "${private:-}" ] && bash "$root/scripts/testpg.sh" stop "$build/demo-pg" >/dev/null
	return 0
}
trap cleanup EXIT

if [ -z "$database" ] && [ -z "${PGHOST:-}${PGDATABASE:-}${PGSERVICE:-}${PGPORT:-}" ]; then
	say "starting a private PostgreSQL under $build/demo-pg"
	bash "$root/scripts/testpg.sh" start "$build/demo-pg"
	database=$(cat "$build/demo-pg/conninfo")
	private=1
fi
if [ -n "$database" ]; then
	pgjob+=(--database "$database")
	pgjobd_args+=(--database "$database")
fi

say "pgjob migrate"
"${pgjob[@]}" migrate

say "enqueueing example jobs"
ids=()
for i in 1 2 3; do ids+=("$("${pgjob[@]}" enqueue hello "{\"n\": $i}")"); done
for i in 1 2 3 4 5; do ids+=("$("${pgjob[@]}" enqueue noop "{\"n\": $i}")"); done
ids+=("$("${pgjob[@]}" enqueue noop '{"fail": "dead"}')")
ids+=("$("${pgjob[@]}" enqueue sleep '{}' --priority -1)")
list=$(IFS=,; echo "${ids[*]}")
echo "enqueued jobs $list"

say "running pgjobd -c config/example.yaml until they are done"
"$build/pgjobd" -c "$root/config/example.yaml" "${pgjobd_args[@]}" &
daemon=$!
psql_db=(psql -X -q -A -t)
[ -n "$database" ] && psql_db+=("$database")
for _ in $(seq 1 300); do
	left=$("${psql_db[@]}" -c "select count(*) from pgjob.jobs where id in ($list) and state in ('available', 'running')")
	[ "$left" = "0" ] && break
	kill -0 "$daemon" 2>/dev/null || { echo "run.sh: pgjobd exited early" >&2; daemon=""; exit 1; }
	sleep 0.2
done
kill -TERM "$daemon"; wait "$daemon" || true; daemon=""

say "what happened"
psql -X -P pager=off ${database:+"$database"} -c "select id, kind, state, attempts, result, left(last_error, 60) as last_error from pgjob.jobs where id in ($list) order by id"
[ "$left" = "0" ] || { echo "run.sh: $left jobs were not finished" >&2; exit 1; }
echo "all done."
