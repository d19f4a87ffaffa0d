-- Plain jobs that ended done, kept out of the hot table
-- (sql/upgrade/019_jobs_done.sql says why at length).  The end of a plain
-- job (done, with no workflow, batch, parent or child: nothing that reads
-- its row later; until version 40 only at its first claim) deletes its row
-- from pgjob.jobs and appends a copy here in the same statement.  This table is written only at
-- its end: a btree on id (a job by id, newest first) and a BRIN index on
-- finished_at (a summary per 128 pages, nothing per row).
--
-- Pruning without deletes: partitioned by list on ring, 0 to 15; a job's
-- ring is the period of its end, floor(epoch / width) mod 16, with width
-- pgjob.done_width(retention).  A ring is written for one width and then
-- not again for 15 more; the pruning duty truncates it whole
-- (pgjob.prune_done()).
--
-- Its columns are pgjob.jobs's, in the order an upgraded database has
-- them (ring came with version 19, enqueued_by with 30); a column added to
-- pgjob.jobs that a done job keeps is added here too, and to
-- pgjob.all_jobs and pgjob.restore_done().
create table pgjob.jobs_done (
	id bigint not null,
	queue text default 'default'::text not null,
	kind text not null,
	payload jsonb default '{}'::jsonb not null,
	priority smallint default 0 not null,
	run_at timestamp with time zone default now() not null,
	state text default 'available'::text not null,
	attempts integer default 0 not null,
	max_attempts integer,
	locked_by text,
	locked_until timestamp with time zone,
	lease_token bigint default 0 not null,
	unique_key text,
	ordering_key text,
	last_error text,
	result jsonb,
	created_at timestamp with time zone default now() not null,
	finished_at timestamp with time zone,
	lost_attempts integer default 0 not null,
	limit_key text,
	cost integer default 1 not null,
	attempted_at timestamp with time zone,
	children boolean,
	parents_left integer,
	on_parent_failure text,
	workflow_id bigint,
	step text,
	batch_id bigint,
	last_wall_ms integer,
	last_cpu_ms integer,
	last_max_rss_kb integer,
	last_status integer,
	ring smallint not null,
	enqueued_by oid,
	traceparent text,
	constraint jobs_done_plain_check check (((state = 'done'::text) and (workflow_id is null) and (batch_id is null) and (parents_left is null) and (children is not true)))
)
partition by list (ring);

do $$
begin
	for i in 0..15 loop
		execute format('create table pgjob.jobs_done_%s partition of'
			' pgjob.jobs_done for values in (%s)', i, i);
		-- Each ring is written in bursts and emptied whole: it
		-- needs autovacuum for its statistics and the BRIN summary
		-- alone.
		execute format('alter table pgjob.jobs_done_%s set'
			' (autovacuum_vacuum_insert_scale_factor = 0.05,'
			' autovacuum_analyze_scale_factor = 0.02)', i);
	end loop;
end
$$;
create index jobs_done_id_idx on pgjob.jobs_done (id);
create index jobs_done_finished_idx on pgjob.jobs_done using brin (finished_at)
	with (autosummarize = on);
-- The jobs done at a later attempt (version 40), whose attempt rows
-- pgjob.prune_done() deletes with their ring: an entry only for them, so
-- the end of a job done at its first attempt pays a test of the
-- predicate, and a ring's rows are found without reading the ring.
create index jobs_done_tried_idx on pgjob.jobs_done (id)
	where (lease_token > 1);
