#!/usr/bin/env bash
# What pgjob.enqueue_workflow() costs on large shapes (docs/performance.md,
# "Who enqueued, and workflows in one pass"):
#
#   tests/bench/workflow.sh             10,000 steps of each shape
#   tests/bench/workflow.sh --short     1,000 steps: what the suite's --short runs
#   tests/bench/workflow.sh --steps N   N steps instead
#
# It starts its own PostgreSQL (scripts/testpg.sh), migrates it, and prints
# one markdown row per shape, each the seconds of one enqueue_workflow()
# call (one transaction, rolled back so that every shape starts from an
# empty table):
#
#   - chain: step i after step i-1;
#   - fan-out: one root, every other step after it;
#   - fan-in: every step but the last a root, the last after all of them;
#   - DAG: step i after up to 10 steps chosen among the 100 before it
#     (a fixed seed: the same graph each run), about 10 edges a step.
#
# The specs are built by the server before the clock starts.  Figures are
# printed, never asserted.  PGJOBD_BUILD_DIR picks the build folder.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}

steps=10000
while [ $# -gt 0 ]; do
	case $1 in
	--short) steps=1000 ;;
	--steps) steps=$2; shift ;;
	*) echo "usage: workflow.sh [--short] [--steps N]" >&2; exit 2 ;;
	esac
	shift
done

cmake --build "$build" -j2 --target pgjob >/dev/null
dir="$build/bench-workflow"
bash "$root/scripts/testpg.sh" start "$dir" >/dev/null
cleanup() { bash "$root/scripts/testpg.sh" stop "$dir" >/dev/null; }
trap cleanup EXIT
db=$(cat "$dir/conninfo")
sql() { psql "$db" -X -q -At -v ON_ERROR_STOP=1 "$@"; }
"$build/pgjob" -d "$db" migrate >/dev/null

# A step's spec: its name and the names of the steps it comes after.
sql <<SQL
create table wf_spec (shape text primary key, spec jsonb);
select setseed(0.46);
insert into wf_spec
select 'chain', jsonb_build_object('steps', jsonb_agg(jsonb_build_object(
	'name', 's' || i, 'kind', 'k',
	'after', case when i > 1 then jsonb_build_array('s' || (i - 1))
		else '[]' end) order by i))
  from generate_series(1, $steps) i;
insert into wf_spec
select 'fan-out', jsonb_build_object('steps', jsonb_agg(jsonb_build_object(
	'name', 's' || i, 'kind', 'k',
	'after', case when i > 1 then '["s1"]'::jsonb else '[]' end) order by i))
  from generate_series(1, $steps) i;
insert into wf_spec
select 'fan-in', jsonb_build_object('steps', jsonb_agg(jsonb_build_object(
	'name', 's' || i, 'kind', 'k',
	'after', case when i = $steps then (select jsonb_agg('s' || x)
		from generate_series(1, $steps - 1) x) else '[]' end) order by i))
  from generate_series(1, $steps) i;
insert into wf_spec
select 'DAG', jsonb_build_object('steps', jsonb_agg(jsonb_build_object(
	'name', 's' || a.i, 'kind', 'k', 'after', a.after) order by a.i))
  from (select i, coalesce((select jsonb_agg(distinct 's'
		|| (i - 1 - floor(random() * least(i - 1, 100))::int + 0 * r))
		  from generate_series(1, least(i - 1, 10)) r), '[]') as after
	  from generate_series(1, $steps) i) a;
SQL

echo "| shape ($steps steps) | edges | seconds |"
echo "| --- | ---: | ---: |"
for shape in chain fan-out fan-in DAG; do
	edges=$(sql -c "select sum(jsonb_array_length(s -> 'after'))
		from wf_spec, jsonb_array_elements(spec -> 'steps') s
		where shape = '$shape'")
	secs=$(sql <<SQL
begin;
select extract(epoch from clock_timestamp()) as t0 \gset
select pgjob.enqueue_workflow(spec) is not null from wf_spec where shape = '$shape' \g /dev/null
select round((extract(epoch from clock_timestamp()) - :t0)::numeric, 3);
rollback;
SQL
)
	echo "| $shape | $edges | $secs |"
done
