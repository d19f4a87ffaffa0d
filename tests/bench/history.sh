#!/usr/bin/env bash
# What keeping done jobs costs the statement that ends them, and a storage
# for them measured against today's (issue 51, target 1: retention 7d at
# 0.85x of retention 0, WAL <= 550 B a job):
#
#   tests/bench/history.sh [--short] [--jobs N] [--batch B] [--rounds R]
#
# On its own PostgreSQL (default durability), with the schema migrated, it
# writes N done jobs (default 200,000) in batches of B (default 1,000, a
# finish's size under load) three ways, R rounds in turn (default 3):
#
#   rows      one row a job in pgjob.jobs_done, as the finish writes them
#             (src/db/finish.c, fm): heap, jobs_done_id_idx, the BRIN
#             summary and jobs_done_tried_idx's predicate;
#   no-btree  the same without jobs_done_id_idx (its share: the btree is
#             what finds a job by id and lists the newest first);
#   batches   one row a batch: its jobs as an array of pgjob.jobs_done
#             (compressed with lz4), its lowest and highest id, and a GiST
#             index over that range to find a job by id.
#
# Each line: milliseconds a round, µs and WAL bytes a job, the size on
# disk, and the time to find 1,000 jobs by id.  The jobs' rows are read
# from a table made first, so that what is timed is the write.  --short:
# seconds, every job written and found again in each form (ctest
# bench.history_short); no timing is asserted.  Run it on an idle machine
# (docs/performance.md, "Index entries and row versions per job").
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}
n=200000 batch=1000 rounds=3 short=0
while [ $# -gt 0 ]; do
	case "$1" in
	--short) short=1 n=4000 rounds=1 ;;
	--jobs) n=$2; shift ;;
	--batch) batch=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	*) echo "usage: history.sh [--short] [--jobs N] [--batch B] [--rounds R]" >&2; exit 2 ;;
	esac
	shift
done
dir=$(mktemp -d /tmp/pgjobd-history.XXXXXX)
PGJOBD_TESTPG_DURABLE=1 bash "$root/scripts/testpg.sh" start "$dir/pg" >/dev/null
trap 'bash "$root/scripts/testpg.sh" stop "$dir/pg" >/dev/null; rm -rf "$dir"' EXIT
db=$(cat "$dir/pg/conninfo")
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$db" "$@"; }
"$build/pgjob" --database "$db" migrate >/dev/null

# The jobs as a finish has them (a payload, a worker's name, the times),
# and the three writers, each a function over batches of B.
sql <<SQL
create table src as select g::bigint as id, 'default'::text as queue,
	'noop'::text as kind, jsonb_build_object('id', g, 'account', g % 977)
	as payload, now() - interval '1 second' as created_at
	from generate_series(1, $n) g;
create index on src (id);
analyze src;
create table batch_done (lo bigint not null, hi bigint not null,
	ring smallint not null, n int not null, rows pgjob.jobs_done[] not null);
alter table batch_done alter column rows set compression lz4;
create index batch_done_range_idx on batch_done
	using gist (int8range(lo, hi, '[]'));
create function write_rows(b int) returns void language plpgsql as \$\$
begin
	for i in 0 .. ($n - 1) / b loop
		insert into pgjob.jobs_done (id, queue, kind, payload, state,
			attempts, locked_by, lease_token, created_at, run_at,
			attempted_at, finished_at, last_wall_ms, last_cpu_ms,
			last_max_rss_kb, ring)
		select id, queue, kind, payload, 'done', 1, 'host-a:4242:1', 1,
			created_at, created_at, now(), now(), 0, 0, 5120, 3
		  from src where id > i * b and id <= (i + 1) * b;
	end loop;
end \$\$;
create function write_batches(b int) returns void language plpgsql as \$\$
begin
	for i in 0 .. ($n - 1) / b loop
		insert into batch_done
		select min(id), max(id), 3, count(*),
			array_agg(row(id, queue, kind, payload, 0, created_at,
			'done', 1, null, 'host-a:4242:1', null, 1, null, null,
			null, null, created_at, now(), 0, null, 1, now(), null,
			null, null, null, null, null, 0, 0, 5120, null, 3, null,
			null)::pgjob.jobs_done order by id)
		  from src where id > i * b and id <= (i + 1) * b;
	end loop;
end \$\$;
-- 1,000 jobs found by id (every n/1000-th), from either storage.
create function find_rows() returns bigint language sql as \$\$
	select count(*) from generate_series(1, $n, greatest($n / 1000, 1)) k
	 cross join lateral (select 1 from pgjob.jobs_done d
		where d.id = k) x \$\$;
create function find_batches() returns bigint language sql as \$\$
	select count(*) from generate_series(1, $n, greatest($n / 1000, 1)) k
	 cross join lateral (select 1 from batch_done b, unnest(b.rows) r
		where int8range(b.lo, b.hi, '[]') @> k::bigint
		  and r.id = k) x \$\$;
SQL

# One way: "ms us_per_job wal_per_job size_kb find_ms written found".
once() { # rows|no-btree|batches
	sql -c "truncate pgjob.jobs_done, batch_done" -c "checkpoint" >/dev/null
	local idx="" write="select write_rows($batch)" find="select find_rows()"
	if [ "$1" = no-btree ]; then
		# Without it a job is found by reading its ring: not timed.
		idx="drop index pgjob.jobs_done_id_idx;"
		find="select count(*) from generate_series(1, $n, greatest($n / 1000, 1))"
	fi
	local rel="pg_total_relation_size('pgjob.jobs_done_3')" count="select count(*) from pgjob.jobs_done"
	if [ "$1" = batches ]; then
		write="select write_batches($batch)" find="select find_batches()"
		rel="pg_total_relation_size('batch_done')"
		count="select coalesce(sum(n), 0) from batch_done"
	fi
	sql <<SQL
begin;
$idx
select pg_current_wal_insert_lsn() as l0, clock_timestamp() as t0 \gset
$write \gset
select extract(epoch from clock_timestamp() - :'t0') * 1000 as ms,
	pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'l0') as wal \gset
commit;
select clock_timestamp() as t1 \gset
select ($find) as found \gset
select extract(epoch from clock_timestamp() - :'t1') * 1000 as fms \gset
select ($count) as written \gset
select format('%s %s %s %s %s %s %s', round(:ms), round((:ms * 1000 / $n)::numeric, 2),
	round(:wal / $n), $rel / 1024, case when '$1' = 'no-btree' then '-'
	else round(:fms)::text end, :written, :found);
SQL
	[ "$1" = no-btree ] && sql -c "create index jobs_done_id_idx on pgjob.jobs_done (id)" >/dev/null
	return 0
}

printf '%-9s %-6s %10s %10s %12s %10s %12s\n' way round "ms" "us/job" "WAL B/job" "size kB" "find 1000 ms"
fail=0
want_found=$(sql -c "select count(*) from generate_series(1, $n, greatest($n / 1000, 1))")
for r in $(seq "$rounds"); do
	for way in rows no-btree batches; do
		read -r ms us wal kb fms written found <<<"$(once "$way")"
		printf '%-9s %-6s %10s %10s %12s %10s %12s\n' "$way" "$r" "$ms" "$us" "$wal" "$kb" "$fms"
		[ "$written" = "$n" ] || { echo "history: $way wrote $written of $n jobs" >&2; fail=1; }
		[ "$found" = "$want_found" ] || { echo "history: $way found $found of $want_found jobs" >&2; fail=1; }
	done
done
exit "$fail"
